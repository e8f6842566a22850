"""Cost preview: token counts by hand, measured throughput overriding the estimate, bad tables, the verb."""

import csv
import dataclasses
import functools

import pytest

from pipeline.artifacts import csv_text
from pipeline.bench import throughput_sizes
from pipeline.cli import main
from pipeline.config import load_preset
from pipeline.planning import cost
from pipeline.planning.grid import Grid, lm_eval_requests
from pipeline.planning.measured import THROUGHPUT_COLUMNS, MeasuredTable, read_throughput

H100_PEAK_BF16 = 989e12


@pytest.fixture(scope="module")
def paper():
    return load_preset({"preset": "paper"})


@pytest.fixture(scope="module")
def paper_workloads(paper):
    return {(w.stage, w.model_id): w for w in Grid.load(paper).costed}


def write_table(path, rows, columns=THROUGHPUT_COLUMNS):
    path.write_text(csv_text([{column: row[column] for column in columns} for row in rows], columns))
    return path


def table_row(family, size, num_layers, tokens_per_s, device="h100"):
    values = (device, family, size, 1280, num_layers, 1024, 1, tokens_per_s, "2026-11-22", "test")
    return dict(zip(THROUGHPUT_COLUMNS, values, strict=True))


def test_token_counts_match_the_paper_grid(paper, paper_workloads):
    large = paper_workloads[("pretrain", "owt-large-gpt")]
    assert large.tokens == 40_000 * 256 * 1024 and large.passes == 3
    llama = paper_workloads[("pretrain", "owt-llama1b-diffeq_llama")]
    assert llama.tokens == 40_000 * 256 * 2048
    assert llama.vocab == 32_000
    finetune = paper_workloads[("finetune", "ft-wt103-owt-diffeq18-n9-lora")]
    assert finetune.tokens == 10_000 * 256 * 1024
    assert (finetune.family, finetune.run.size, finetune.num_layers) == ("discrete_diffeq_gpt", "ft18", 9)
    baseline = paper_workloads[("finetune", "ft-owt-wt103-gpt24-full")]
    assert (baseline.family, baseline.num_layers) == ("gpt", 24)
    # lm-eval: 4-choice arc_c/arc_e/hellaswag/logiqa/mmlu/sciq, 1 request lambada x2, 2-choice piqa/winogrande/wsc273
    per_shot = 4 * (1172 + 2376 + 10042 + 651 + 14042 + 1000) + 2 * 5153 + 2 * (1838 + 1267 + 273)
    evaluate = paper_workloads[("evaluate", "owt-large-gpt")]
    assert evaluate.tokens == 2 * per_shot * 1024 and evaluate.passes == 1


def test_local_tasks_need_a_limit_and_count_at_most_four_requests():
    assert lm_eval_requests({"tasks": ["tiny_choice", "piqa"], "shots": [0, 5], "limit": 100}) == 2 * (
        100 * 4 + 100 * 2
    )
    with pytest.raises(ValueError, match="'downstream.tasks' names 'tiny_choice'"):
        lm_eval_requests({"tasks": ["tiny_choice"], "shots": [0], "limit": None})


def test_estimate_is_levanter_flops_at_mfu_of_the_peak(paper, paper_workloads):
    large = paper_workloads[("pretrain", "owt-large-gpt")]
    hidden, layers, seq, vocab = 1280, 36, 1024, 50257
    attention = (2 * seq**2 * hidden + 3 * seq**2 * 20 + 2 * seq**2 * hidden) / seq
    per_layer = 2 * 2 * hidden * 4 * hidden + 2 * hidden * 3 * hidden + 2 * hidden * hidden + attention
    forward = layers * per_layer + 2 * hidden * vocab
    [row] = cost.cost_rows([large], MeasuredTable(Grid.load(paper), "h100"))
    assert row["forward_flops_per_token"] == pytest.approx(forward)
    assert row["gpu_hours"] == pytest.approx(row["tokens"] * 3 * forward / (0.4 * H100_PEAK_BF16) / 3600)
    assert row["source"] == "estimate" and row["parameters"] == 774_030_080


def test_measured_table_overrides_the_estimate_for_its_sizes(tmp_path):
    table = write_table(
        tmp_path / "t.csv", [table_row("gpt", "large", 36, 100_000), table_row("gpt", "large", 36, 1, device="a100")]
    )
    stages, runs = cost.preview(Grid.load(load_preset({"preset": "paper"})), "h100", table)
    by_id = {(row["stage"], row["run_id"]): row for row in runs}
    measured = by_id[("pretrain", "owt-large-gpt")]
    assert measured["source"] == "measured"
    assert measured["gpu_hours"] == pytest.approx(40_000 * 256 * 1024 / 100_000 / 3600)
    evaluate = by_id[("evaluate", "owt-large-gpt")]
    assert evaluate["gpu_hours"] == pytest.approx(evaluate["tokens"] / 3 / 100_000 / 3600)
    assert by_id[("pretrain", "owt-large-diffeq")]["source"] == "estimate"
    assert {row["stage"]: row["source"] for row in stages}["pretrain"] == "estimate+measured"


@pytest.mark.parametrize(
    ("rows", "columns", "message"),
    [
        (
            [table_row("gpt", "large", 36, 1e5)],
            [c for c in THROUGHPUT_COLUMNS if c != "tokens_per_s_per_gpu"],
            "missing column 'tokens_per_s_per_gpu'",
        ),
        (
            [table_row("gpt", "large", 36, "fast")],
            THROUGHPUT_COLUMNS,
            "column 'tokens_per_s_per_gpu' must hold a positive number on line 2",
        ),
        ([table_row("gpt", "large", 36.5, 1e5)], THROUGHPUT_COLUMNS, "column 'num_layers'"),
        ([table_row("gpt", "large", 36, 1e5)] * 2, THROUGHPUT_COLUMNS, "line 3 repeats family 'gpt'"),
        (
            [table_row("gpt", "large", 36, 1e5, device="a100")],
            THROUGHPUT_COLUMNS,
            "no row for device 'h100'",
        ),
    ],
)
def test_malformed_table_fails_with_one_sentence_naming_file_and_column(tmp_path, rows, columns, message):
    table = write_table(tmp_path / "bad.csv", rows, columns)
    with pytest.raises(ValueError, match=message) as error:
        read_throughput(table, "h100")
    text = str(error.value)
    assert text.startswith(f"{table}: ") and text.endswith(".") and "\n" not in text


def test_unknown_device_without_a_table_fails():
    with pytest.raises(ValueError, match="--device 'tpu9' has no measured throughput"):
        cost.preview(Grid.load(load_preset({"preset": "tiny"})), "tpu9")


def test_verb_prints_every_stage_and_writes_the_run_csv(tmp_path, capsys):
    out = tmp_path / "runs.csv"
    assert main(["cost", "--preset", "paper", "--device", "h100", "--csv", str(out)]) == 0
    printed = capsys.readouterr().out
    for stage in (*cost.STAGES, "total"):
        assert f"\n{stage} " in printed
    assert "estimate, not measured" in printed and "negligible" in printed
    rows = list(csv.DictReader(out.open()))
    assert [row["stage"] for row in rows].count("finetune") == 20 and len(rows) == 28 + 20 + 4
    assert {row["source"] for row in rows} == {"estimate"}


def test_verb_reports_a_bad_table_as_an_error(tmp_path, capsys):
    table = write_table(tmp_path / "bad.csv", [table_row("gpt", "large", 36, -3)])
    assert main(["cost", "--throughput", str(table)]) == 1
    assert capsys.readouterr().err.startswith(f"error: {table}: column 'tokens_per_s_per_gpu'")


def test_measure_writes_a_table_the_preview_reads(tmp_path, monkeypatch):
    """The benchmark keeps rows of models it did not measure and writes one row per measured model."""
    out = write_table(
        tmp_path / "throughput-sizes-h100.csv", [table_row("gpt", "other", 3, 7), table_row("gpt", "small", 4, 7)]
    )
    measured = {"tokens_per_s": 1234.5, "median_ms": 1.0, "iqr_ms": 0.1, "params": 99, "micro_batch": 8}
    monkeypatch.setattr(throughput_sizes, "measure_workload", lambda *args: measured)
    throughput_sizes.measure("tiny", "h100", 8, 1, 1, families=["gpt"], sizes=["small"], out=out)
    table = read_throughput(out, "h100")
    assert table == {("gpt", "other", 3): 7.0, ("gpt", "small", 4): 1234.5}
    stages, runs = cost.preview(Grid.load(load_preset({"preset": "tiny"})), "h100", out)
    assert {row["run_id"] for row in runs if row["source"] == "measured"} == {"wt103-small-gpt", "owt-small-gpt"}


def test_measure_workload_times_a_real_train_step():
    config = load_preset({"preset": "tiny"})
    workload = Grid.load(config).workloads["owt-small-gpt"]
    spec = workload.run
    small = dataclasses.replace(
        workload,
        run=dataclasses.replace(
            spec, model=dataclasses.replace(spec.model, seq_len=16, hidden_dim=16, num_heads=2, num_layers=1)
        ),
    )
    result = throughput_sizes.measure_workload(small, micro_batch=2, repeats=2, warmup=1)
    assert result["micro_batch"] == 2 and result["params"] > 0
    assert result["tokens_per_s"] == pytest.approx(2 * 16 / (result["median_ms"] / 1e3))


def test_passes_over_the_data_and_checkpoint_disk_per_run(paper, paper_workloads):
    """WikiText-103 runs are ~22 passes (10k × 256 × 1024 over 0.12 B tokens); a run keeps its final checkpoint
    (12 bytes/parameter) plus one per ``keep_checkpoints_every`` steps when the preset asks."""
    small, large = paper_workloads[("pretrain", "wt103-small-gpt")], paper_workloads[("pretrain", "owt-large-gpt")]
    kept_train = dataclasses.replace(large.train, keep_checkpoints_every=1000)
    kept_every = dataclasses.replace(large, run=dataclasses.replace(large.run, train=kept_train))
    rows = cost.cost_rows([small, large, kept_every], MeasuredTable(Grid.load(paper), "h100"))
    assert rows[0]["data_passes"] == pytest.approx(10_000 * 256 * 1024 / 0.12e9)
    assert rows[1]["data_passes"] == pytest.approx(40_000 * 256 * 1024 / 9.04e9)
    assert rows[1]["checkpoint_bytes"] == 774_030_080 * 12
    assert rows[1]["running_checkpoint_bytes"] == 774_030_080 * 12 * 3, "two complete and one being written"
    assert rows[2]["checkpoint_bytes"] == 774_030_080 * 12 * 40  # steps 1000 ... 39000, and step-39999
    llama = paper_workloads[("pretrain", "owt-llama1b-llama")]
    assert cost.cost_rows([llama], MeasuredTable(Grid.load(paper), "h100"))[0]["data_passes"] is None


MODEL_COST_PROBE = r"""
import json, sys
from pathlib import Path
import pipeline.planning.cost as cost
import pipeline.planning.grid as grid
from pipeline.config import load_preset
from pipeline.planning.grid import Grid

grid.MODEL_COST_CACHE = Path(sys.argv[1])
config = load_preset({"preset": "paper"})
costs = {f"{workload.stage}/{workload.model_id}": workload.cost
         for workload in Grid.load(config).costed}
print(json.dumps({"costs": costs, "jax": "jax" in sys.modules}))
"""


def test_model_costs_are_counted_once_per_model_code_and_then_read_without_jax(tmp_path, monkeypatch, paper):
    """Sizing a SLURM job needs every run's parameters and FLOPs/token: counted once (here, in this process, which
    imports JAX and Levanter to count them), then read from the cache, so reading the workflow (a dry run, each job on
    its node) imports neither; a cache written by other model code is not trusted."""
    import json

    from cli_testkit import python_run

    from pipeline.planning import grid

    cache = tmp_path / "model-cost.json"
    monkeypatch.setattr(grid, "MODEL_COST_CACHE", cache)
    for name in ("read_model_costs", "recipe_cost"):  # empty caches here; the session's come back after the test
        monkeypatch.setattr(grid, name, functools.cache(getattr(grid, name).__wrapped__))
    costed = {f"{workload.stage}/{workload.model_id}": workload for workload in Grid.load(paper).costed}
    counted = {name: list(workload.cost) for name, workload in costed.items()}
    result = python_run("-c", MODEL_COST_PROBE, str(cache), timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    read = json.loads(result.stdout.strip().splitlines()[-1])
    assert not read["jax"] and read["costs"] == counted and len(counted) == 28 + 20 + 4
    assert counted["pretrain/owt-small-gpt"][0] == 124_439_808
    cache.write_text(json.dumps({**json.loads(cache.read_text()), "code": "another model code"}))
    grid.read_model_costs.cache_clear()
    grid.recipe_cost.cache_clear()
    assert grid.read_model_costs() == {}
    recounted = dataclasses.replace(costed["pretrain/owt-small-gpt"])  # a fresh workload, its cost not yet read
    assert list(recounted.cost) == counted["pretrain/owt-small-gpt"]
    assert json.loads(cache.read_text())["code"] == grid.model_code_version(), "recounted under this model code"
