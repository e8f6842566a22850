"""A trained run through the interfaces researchers know: lm-eval's command line (model ``diffeqformer-run``) scores
it as the ``downstream`` verb does, and ``export-hf`` gives a checkpoint that transformers loads and scores alike. The
run is one the tiny DAG trained (``tiny_dag_run``, tests/conftest.py)."""

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
import yaml
from cli_testkit import ROOT, pipeline_verb
from conftest import torch_loglikelihoods
from levanter.compat.hf_checkpoints import load_tokenizer

from pipeline.config import load_preset, pretrain_runs

TASK_DIR = ROOT / "pipeline" / "evaluate" / "tasks"
TASKS = ("tiny_lambada", "tiny_choice")


@pytest.fixture(scope="module")
def tokenizer_dir(tiny_dag) -> Path:
    return tiny_dag / "data" / "tokenizers" / "bpe"


@pytest.fixture(scope="module")
def gpt_run(tiny_dag_run) -> Path:
    """A copy of the tiny DAG's GPT-2 run wt103-small-gpt (what these tests need is a trained run, not its training:
    tests/train)."""
    return tiny_dag_run("wt103-small-gpt")


def metrics(results: dict) -> dict:
    return {
        (task, metric): value
        for task in TASKS
        for metric, value in results["results"][task].items()
        if metric.endswith(",none") and "stderr" not in metric
    }


@pytest.mark.e2e
def test_the_lm_eval_command_line_scores_a_run_as_the_downstream_verb(gpt_run, tokenizer_dir, tmp_path):
    ours = pipeline_verb(
        "downstream",
        "--run-dir",
        str(gpt_run),
        "--tokenizer",
        str(tokenizer_dir),
        "--out-dir",
        str(tmp_path / "downstream"),
        "--pair",
        "gpt-vs-gpt",
        "--tasks",
        *TASKS,
        "--shots",
        "0",
        "--task-dir",
        str(TASK_DIR),
        "--limit",
        "8",
        "--batch-size",
        "8",
        "--ray-num-cpus",
        "1",
    )
    assert ours.returncode == 0, ours.stderr[-3000:]
    cli = pipeline_verb(
        "lm-eval",
        "--model",
        "diffeqformer-run",
        "--model_args",
        f"run_dir={gpt_run},tokenizer={tokenizer_dir}",
        "--tasks",
        ",".join(TASKS),
        "--include_path",
        str(TASK_DIR),
        "--num_fewshot",
        "0",
        "--limit",
        "8",
        "--batch_size",
        "4",
        "--output_path",
        str(tmp_path / "lm-eval"),
    )
    assert cli.returncode == 0, cli.stderr[-3000:]
    (cli_results,) = (tmp_path / "lm-eval").rglob("results_*.json")
    expected = metrics(json.loads((tmp_path / "downstream" / "lm_eval_0shot.json").read_text()))
    got = metrics(json.loads(cli_results.read_text()))
    assert set(got) == set(expected) and ("tiny_lambada", "perplexity,none") in got
    assert got == pytest.approx(expected, rel=1e-6)


@pytest.mark.e2e
def test_export_hf_gives_a_checkpoint_that_transformers_scores_alike(gpt_run, tokenizer_dir, tmp_path, requests):
    from pipeline.evaluate.harness import RunLM

    result = pipeline_verb("export-hf", str(gpt_run), str(tmp_path / "hf"), "--tokenizer", str(tokenizer_dir))
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hf"], "no temporary folder is left behind"
    torch_model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "hf", torch_dtype=torch.float32).eval()
    assert type(torch_model).__name__ == "GPT2LMHeadModel"
    exported_tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path / "hf")
    assert exported_tokenizer.get_vocab() == load_tokenizer(str(tokenizer_dir)).get_vocab()
    lm = RunLM(str(gpt_run), str(tokenizer_dir), batch_size=8)
    ours = np.array([score for score, _ in lm.loglikelihood(requests[:8], disable_tqdm=True)])
    reference = np.array([score for score, _ in torch_loglikelihoods(torch_model, lm, requests[:8])])
    assert np.abs(ours - reference).max() <= 1e-3


def test_export_hf_refuses_a_diffeqformer_run_in_one_sentence(tmp_path, capsys):
    """The verb's refusal, in this process (its command line as a process: the export of a GPT run above)."""
    from pipeline.cli import main

    spec = pretrain_runs(load_preset({"preset": "tiny"}))["wt103-small-diffeq"]
    run_dir = tmp_path / spec.run_id
    run_dir.mkdir()
    (run_dir / "config.yaml").write_text(yaml.safe_dump(dataclasses.asdict(spec)))
    assert main(["export-hf", str(run_dir), str(tmp_path / "hf"), "--tokenizer", str(tmp_path / "bpe")]) == 1
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        f"error: {run_dir}: wt103-small-diffeq is a 'diffeq' run, which has no Hugging Face architecture; only the "
        f"gpt and llama baselines can be exported."
    )
    assert not (tmp_path / "hf").exists()
