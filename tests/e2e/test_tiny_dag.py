"""The whole tiny DAG, end to end, through Snakemake (the same rules as the paper preset), every training and
evaluation job placed as a task on an external Ray cluster (a `ray start --head` on loopback). The DAG is the
session's ``tiny_dag`` (tests/conftest.py), which other modules read too: the reruns here change only
owt-small-gpt, owt-gpt24-gpt and the GPT fine-tunes from OpenWebText."""

import json
import math
import re
from pathlib import Path

import pandas as pd
import pytest
from e2e.dag_snakemake import snakemake

from pipeline.config import finetune_runs, load_preset, memory_probes, pretrain_runs

pytestmark = pytest.mark.e2e


def test_training_ran_on_the_external_ray_cluster(tiny_dag, tiny_dag_ray_address):
    log = (tiny_dag / "logs" / "pretrain" / "wt103-small-gpt.log").read_text()
    assert f"Submitting pretrain to Ray ({tiny_dag_ray_address})" in log
    provenance = json.loads((tiny_dag / "runs" / "wt103-small-gpt" / "provenance.json").read_text())
    assert provenance["ray"]["gcs_address"].endswith(tiny_dag_ray_address.split(":")[1])


def test_the_warm_pool_starts_at_most_its_capacity_of_workers_per_key(tiny_dag):
    """Workers named in the job logs (``worker-<key>-<id>``): with room beside the running jobs, one replaced only
    after ``MAX_JOBS`` jobs or ``IDLE_S`` idle, a key needs at most the whole pool (the Ray cluster's CPUs), not one
    worker per job of another key (12–16 for 53 jobs when each miss evicted every idle worker)."""
    logs = "".join(log.read_text() for log in (tiny_dag / "logs").rglob("*.log"))
    workers = set(re.findall(r"warm worker (worker-(\w+)-\w+) \(process", logs))
    cpus = json.loads((tiny_dag / "runs" / "wt103-small-gpt" / "provenance.json").read_text())["ray"]["cluster_cpus"]
    assert workers and len(workers) <= cpus * len({key for _, key in workers}), sorted(workers)


def test_every_run_trains_and_learns(tiny_dag):
    runs = pretrain_runs(load_preset({"preset": "tiny"}))
    for run_id, spec in runs.items():
        folder = tiny_dag / "runs" / run_id
        summary = json.loads((folder / "summary.json").read_text())
        records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        losses = [r["loss"] for r in records if "loss" in r]
        assert len(losses) == spec.train.steps == summary["steps_done"], run_id
        assert summary["tokens_seen"] == spec.train.steps * spec.train.batch_size * spec.model.seq_len, run_id
        assert 0 < summary["passes"] < 1 and len(summary["fingerprint"]) == 64, run_id
        first_eval = next(r["eval_ppl"] for r in records if "eval_ppl" in r)
        assert math.isfinite(summary["val_ppl"]) and losses[-1] < losses[0] - 1.0, run_id
        assert summary["val_ppl"] < first_eval / 2, run_id
        assert all(r["tokens_per_s"] > 0 and r["lr"] > 0 for r in records if "loss" in r)
        assert yaml_run_id(folder / "config.yaml") == run_id
        provenance = json.loads((folder / "provenance.json").read_text())
        assert provenance["packages"]["levanter"] == "1.2.dev1644" and provenance["devices"]
        kept = sorted(path.name for path in (folder / "checkpoints").iterdir())
        assert kept == ["identity.json", f"step-{spec.train.steps - 1}"], (run_id, kept)


def yaml_run_id(path: Path) -> str:
    import yaml

    return yaml.safe_load(path.read_text())["run_id"]


def job_counts(output: str) -> dict[str, int]:
    """The 'Job stats' table Snakemake prints: rule name -> number of jobs (without the total)."""
    lines = output.split("Job stats:")[1].strip().splitlines()[2:]
    counts = {}
    for line in lines:
        fields = line.split()
        if len(fields) != 2 or not fields[1].isdigit():
            break
        counts[fields[0]] = int(fields[1])
    counts.pop("total", None)
    return counts


def test_perplexity_table_lists_all_rows_of_tables_1_and_2(tiny_dag):
    table = pd.read_csv(tiny_dag / "tables" / "perplexity.csv")
    assert len(table) == 16
    assert table["val_ppl"].notna().all()
    markdown = (tiny_dag / "tables" / "perplexity.md").read_text()
    assert len(re.findall(r"\| \d+\.\d\d \(\d+\.\d\dM\)", markdown)) == 16
    for label in ("GPT", "Shared parameter", "Shared ODE field", "DiffEqFormer", "Llama", "DiffEqFormer (Llama)"):
        assert f"| {label} " in markdown


def test_finetunes_start_from_the_resampled_source_and_learn_the_target(tiny_dag):
    """Fig. 5 data: every curve starts at step 0 from the resampled source (LoRA's B = 0 makes its start equal
    full fine-tuning's) and ends lower on the target's test split (validation for OWT, which has none); LoRA trains
    a fraction of the parameters."""
    tiny = load_preset({"preset": "tiny"})
    runs = finetune_runs(tiny, pretrain_runs(tiny))
    assert len(runs) == 16
    summaries = {run_id: json.loads((tiny_dag / "runs" / run_id / "summary.json").read_text()) for run_id in runs}
    for run_id, spec in runs.items():
        summary = summaries[run_id]
        records = [json.loads(line) for line in (tiny_dag / "runs" / run_id / "metrics.jsonl").read_text().splitlines()]
        evals = [(r["step"], r["eval_loss"]) for r in records if "eval_loss" in r]
        assert [step for step, _ in evals] == [0, 10, 20, 30], run_id
        assert summary["val_loss"] < summary["initial_val_loss"], run_id
        assert summary["eval_split"] == ("test" if spec.target_dataset == "wt103" else "validation"), run_id
        assert (summary["trainable_fraction"] == 1.0) == (spec.method == "full"), run_id
        if spec.method == "lora":
            full = summaries[run_id.removesuffix("-lora") + "-full"]
            assert summary["initial_val_loss"] == pytest.approx(full["initial_val_loss"], rel=1e-6), run_id
    resampled = {summaries[r]["num_steps"] for r in runs if runs[r].euler_steps}
    assert resampled == {3, 6, 8}


def test_downstream_results_for_both_pairs_and_shots(tiny_dag):
    config = load_preset({"preset": "tiny"})["downstream"]
    for pair, run_ids in config["pairs"].items():
        for run_id in run_ids:
            folder = tiny_dag / "downstream" / run_id
            rows = pd.read_csv(folder / "downstream.csv")
            assert set(rows["pair"]) == {pair} and set(rows["run_id"]) == {run_id}
            assert set(rows["shots"]) == set(config["shots"]) and set(rows["task"]) == set(config["tasks"])
            accuracy = rows[rows["metric"] == "acc"]
            assert accuracy["value"].between(0, 1).all()
            inside = accuracy[accuracy["value"].between(0, 1, inclusive="neither")]
            assert (inside["stderr"] > 0).all() and (accuracy["stderr"] >= 0).all()
            assert (accuracy["n_samples"] == config["limit"]).all()
            for shots in config["shots"]:
                results = json.loads((folder / f"lm_eval_{shots}shot.json").read_text())
                assert set(results["results"]) == set(config["tasks"])
    table = pd.read_csv(tiny_dag / "tables" / "downstream_gpt-large.csv")
    assert len(table) > 0


def test_analyses_produce_their_tidy_tables(tiny_dag):
    analysis = load_preset({"preset": "tiny"})["analysis"]
    runs = pretrain_runs(load_preset({"preset": "tiny"}))
    for run_id in analysis["spectra"]["runs"]:
        spectra = pd.read_csv(tiny_dag / "analysis" / "spectra" / f"{run_id}.csv")
        assert set(spectra["matrix"]) == {"QK", "OV", "FF"}
        spectra = spectra[spectra["matrix"] == "QK"]
        times = spectra["t"].nunique()
        layers = runs[run_id].model.num_layers
        expected = layers * analysis["spectra"]["time_oversampling"] if "diffeq" in run_id else layers
        assert times == expected, run_id
        assert spectra["head"].nunique() == runs[run_id].model.num_heads
    for run_id in analysis["lyapunov"]["runs"]:
        exponents = pd.read_csv(tiny_dag / "analysis" / "lyapunov" / f"{run_id}.csv")
        assert exponents["sentence_id"].nunique() == len(analysis["lyapunov"]["sentences"])
        assert exponents["exponent"].notna().all()
        assert "background-color" in (tiny_dag / "analysis" / "lyapunov" / f"{run_id}.html").read_text()
    stats = pd.read_csv(tiny_dag / "analysis" / "clustering" / "stats.csv").set_index("magnitude")
    assert stats.loc["constant", "n_clusters"] < stats.loc["quartic", "n_clusters"]
    for run_id in analysis["frontier"]["runs"]:
        frontier = pd.read_csv(tiny_dag / "analysis" / "frontier" / f"{run_id}.csv")
        own = frontier[(frontier["solver"] == "euler") & (frontier["num_steps"] == frontier["trained_steps"])]
        summary = json.loads((tiny_dag / "runs" / run_id / "summary.json").read_text())
        assert own["val_loss"].item() == pytest.approx(summary["val_loss"], rel=1e-5), run_id
        assert set(frontier["solver"]) == set(analysis["frontier"]["solvers"])
    probes = {
        probe_id: json.loads((tiny_dag / "analysis" / "memory" / f"{probe_id}.json").read_text())
        for probe_id in memory_probes(load_preset({"preset": "tiny"}))
    }
    diffeq = sorted((p for p in probes.values() if p["family"] == "diffeq"), key=lambda p: p["time_embed_dim"])
    assert [p["time_embed_dim"] for p in diffeq] == analysis["memory"]["time_embed_dims"]
    for probe in probes.values():
        assert probe["backend"] == "cpu" and probe["device_peak_bytes"] is None
        assert probe["batch_size"] == analysis["memory"]["batch_size"]
        assert len(probe["losses"]) == analysis["memory"]["steps"]
        assert 0 < probe["compiled_peak_bytes"] < probe["host_peak_rss_bytes"]
    parameter_growth = diffeq[-1]["parameters"] / diffeq[0]["parameters"]
    memory_growth = diffeq[-1]["compiled_peak_bytes"] / diffeq[0]["compiled_peak_bytes"]
    assert 1 < memory_growth < parameter_growth


def test_the_dag_ends_with_a_report_showing_every_table_and_figure(tiny_dag):
    """`--report-after-run` wrote results/tiny/report.html; headless Chromium must show all of it."""
    from report.chromium import assert_report_shows_figures

    workdir = tiny_dag.parents[1]
    figures = sorted((tiny_dag / "figures").rglob("*.png"))
    tables = sorted((tiny_dag / "tables").glob("*.html"))
    for name in (
        "finetune",
        "frontier",
        "clustering_trajectories",
        "clustering_stats",
        "beta2",
        "memory",
        "time_embed_dim_ppl",
        "time_embed_dim_throughput",
        "time_mlp_design",
    ):
        assert tiny_dag / "figures" / f"{name}.png" in figures
    for kind in ("spectra", "lyapunov", "curves", "downstream"):
        assert any(path.parent.name == kind for path in figures), kind
    for table in ("perplexity", "model_specs", "param_counts", "downstream_gpt-large", "downstream_llama-1b"):
        assert tiny_dag / "tables" / f"{table}.html" in tables
    scorecard = pd.read_csv(tiny_dag / "scorecard.csv")
    claims = scorecard[scorecard["section"] == "claim"]
    assert set(claims["status"]) <= {
        "supported",
        "contradicted",
        "inconclusive",
        "not tested at this scale",
        "control (no verdict)",
        "sensitivity (no verdict)",
        "not run at this preset",
    }
    assert set(scorecard.loc[scorecard["section"] == "number", "status"]) <= {
        "holds",
        "does not hold",
        "not run at this preset",
        "not in the paper",
    }
    memory_claim = scorecard.set_index("item").loc["peak memory grows less than the parameter count with D"]
    assert memory_claim["status"] == "supported", memory_claim["evidence"]
    expected = [str(path.relative_to(workdir)) for path in [*figures, *tables, tiny_dag / "scorecard.html"]]
    assert_report_shows_figures(tiny_dag / "report.html", expected)


def test_changing_one_run_recomputes_only_what_depends_on_it(tiny_dag, ray_head):
    workdir = tiny_dag.parents[1]
    assert "Nothing to be done" in snakemake(workdir, ray_head, "-n").stdout
    assert "Nothing to be done" in snakemake(workdir, "auto", "-n").stdout, "where Ray runs is not a result"
    target = "results/tiny/runs/owt-small-gpt/summary.json"
    before = json.loads((workdir / target).read_text())
    result = snakemake(workdir, ray_head, "--forcerun", target)
    assert result.returncode == 0, result.stderr[-3000:]
    counts = job_counts(result.stdout + result.stderr)
    assert counts.pop("pretrain") == 1 and counts.pop("all") == 1
    assert counts.pop("figure_curves") == 1
    assert set(counts) <= {"perplexity_table", "model_spec_table", "pretrain_runs_csv", "scorecard", "status"}, counts
    summary = json.loads((workdir / target).read_text())
    assert summary["resumed_from_step"] == summary["train_steps"], "the same fingerprint resumes its final checkpoint"
    assert {key: summary[key] for key in ("val_loss", "steps_done", "fingerprint", "final_train_loss")} == {
        key: before[key] for key in ("val_loss", "steps_done", "fingerprint", "final_train_loss")
    }
    assert "Nothing to be done" in snakemake(workdir, ray_head, "-n").stdout


def test_a_changed_spec_or_retrained_source_never_resumes_old_checkpoints(tiny_dag, ray_head):
    """A changed lr reruns a fine-tune source from step 0 (its old checkpoints moved aside), and its fine-tunes, whose
    own specs did not change, restart too. Runs last: it leaves the folder off the preset."""
    workdir = tiny_dag.parents[1]
    runs = ["owt-gpt24-gpt", "ft-owt-wt103-gpt8-lora", "ft-owt-wt103-gpt8-full"]
    before = {run: json.loads((tiny_dag / "runs" / run / "summary.json").read_text()) for run in runs}
    targets = [f"results/tiny/runs/{run}/summary.json" for run in runs[1:]]
    result = snakemake(workdir, ray_head, *targets, config=("pretrain={owt-gpt24: {train: {lr: 1.0e-3}}}",))
    assert result.returncode == 0, result.stderr[-3000:]
    assert job_counts(result.stdout + result.stderr) == {"pretrain": 1, "finetune": 2}
    for run in runs:
        summary = json.loads((tiny_dag / "runs" / run / "summary.json").read_text())
        assert summary["resumed_from_step"] == 0 and summary["steps_done"] == before[run]["steps_done"], run
        assert summary["fingerprint"] != before[run]["fingerprint"], run
        assert summary["val_loss"] != before[run]["val_loss"], run
        [moved] = (tiny_dag / "runs" / run / "superseded").iterdir()
        assert moved.name.endswith(before[run]["fingerprint"][:12]), run
        assert (moved / "checkpoints" / f"step-{before[run]['steps_done'] - 1}" / "metadata.json").is_file(), run
    log = (tiny_dag / "logs" / "pretrain" / "owt-gpt24-gpt.log").read_text()
    assert "checkpoints and metrics of another spec" in log and "training starts from step 0" in log
