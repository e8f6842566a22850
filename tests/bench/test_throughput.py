"""The throughput benchmark at a tiny shape: report structure, consistent ratios, equivalent computations."""

import json

import pytest

from pipeline.bench import throughput
from pipeline.cli import main

TINY = throughput.BenchConfig(
    hidden_dim=32,
    num_layers=2,
    num_heads=4,
    seq_len=16,
    batch_size=2,
    vocab_size=64,
    time_embed_dim=8,
    sinusoidal_dim=8,
    repeats=2,
    warmup=1,
)
TIMINGS = {"train": ("gpt", "diffeq"), "inference": ("gpt", "diffeq_discrete", "diffeq_continuous")}


@pytest.fixture(scope="module")
def result():
    return throughput.run_benchmark(TINY)


def test_report_has_positive_timings_for_every_model(result):
    assert result["config"]["hidden_dim"] == TINY.hidden_dim and result["config"]["dtype"] == "float32"
    assert result["host"]["cores"] >= 1 and result["host"]["cpu_model"]
    assert set(result["versions"]) >= {"jax", "levanter"}
    assert len(result["load_average"]["start"]) == len(result["load_average"]["end"]) == 3
    assert isinstance(result["contended"], bool)
    for group, models in TIMINGS.items():
        for model in models:
            entry = result[group][model]
            assert len(entry["samples_ms"]) == TINY.repeats
            assert min(entry["samples_ms"]) > 0 and entry["median_ms"] > 0 and entry["iqr_ms"] >= 0
            assert entry["tokens_per_s"] == pytest.approx(TINY.batch_size * TINY.seq_len / (entry["median_ms"] / 1e3))
    assert result["inference"]["weight_generation"]["median_ms"] > 0


def test_ratios_are_quotients_of_the_medians(result):
    train, inference = result["train"], result["inference"]
    assert train["ratio"] == pytest.approx(train["diffeq"]["median_ms"] / train["gpt"]["median_ms"])
    gpt_ms = inference["gpt"]["median_ms"]
    assert inference["ratio_discrete"] == pytest.approx(inference["diffeq_discrete"]["median_ms"] / gpt_ms)
    assert inference["ratio_continuous"] == pytest.approx(inference["diffeq_continuous"]["median_ms"] / gpt_ms)
    assert train["meets_goal"] == (train["ratio"] <= throughput.PAPER_GOALS["train"])


def test_timed_models_are_matched(result):
    """The discretised model computes the continuous model's logits with exactly GPT's parameter count."""
    inference, params = result["inference"], result["params"]
    assert inference["max_abs_logit"] > 1e-3
    assert inference["max_abs_logit_diff"] <= 1e-5
    assert params["diffeq_discrete"] == params["gpt"] < params["diffeq"]


def test_main_writes_json_and_markdown(result, tmp_path, monkeypatch):
    configs = []
    monkeypatch.setattr(throughput, "run_benchmark", lambda cfg: configs.append(cfg) or dict(result))
    out = tmp_path / "bench" / "throughput.json"
    assert main(["bench", "throughput", "--hidden-dim", "32", "--repeats", "3", "--out", str(out)]) == 0
    assert configs[0].hidden_dim == 32 and configs[0].repeats == 3 and configs[0].seq_len == 256
    written = json.loads(out.read_text())
    assert written["train"]["ratio"] == result["train"]["ratio"] and written["waited_for_idle_s"] == 0.0
    table = out.with_suffix(".md").read_text()
    assert f"{result['train']['ratio']:.3f}×" in table and "≤ 1.15×" in table and "≤ 1.05×" in table
