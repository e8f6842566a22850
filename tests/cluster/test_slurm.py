"""`profiles/slurm` on a real single-node SLURM cluster on localhost whose daemons, clients and jobs run in a network
namespace with loopback only (no network, as a cluster's compute nodes): every job is submitted with sbatch by
snakemake-executor-plugin-slurm and sized by pipeline/planning/jobs.py. Only the site settings are replaced (a
partition, no GPUs or the node's one GPU without a device, small CPU/memory limits, an HF cache), plus the status
command (no accounting database here) and how soon the plugin first asks SLURM about a submitted job (5 s: its
default of 40 s, meant to spare a busy cluster's controller, left this one idle for most of its 7 mostly sequential
jobs).

These tests change the host (apt, /etc/slurm, munge, daemons): they run only with PIPELINE_HOST_TESTS=1 (`.ci/run`
sets it) and as root, never touch an existing SLURM configuration, and stop the daemons they started."""

import csv
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from cache_testkit import spoil_finished_shards, token_arrays
from cli_testkit import snakemake_in, venv_on_path

from pipeline.cli import main
from pipeline.data.corpora import export_tiny_corpus
from pipeline.data.files import staging_directory
from pipeline.data.shards import finished_shard_count, whole_ledger
from pipeline.execution.errors import STOPPED_AT
from pipeline.preflight.report import COLUMNS
from pipeline.train.attempts import data_attempt_file

ROOT = Path(__file__).resolve().parents[2]
NETNS = os.environ.get("SLURM_TEST_NETNS", "pipeline-slurm")
# What Ray prints when a job's embedded raylet or a worker dies; the raylet's other messages (a full disk, say) are not.
RAY_DIED = re.compile(
    r"NodeDiedError|LocalRayletDiedError|WorkerCrashedError|ActorDiedError|OwnerDiedError"
    r"|[Rr]aylet (?:died|is terminated|is considered dead)|[Ee]very raylet is dead"
)
pytestmark = pytest.mark.e2e


def in_netns(*command: str) -> list[str]:
    return ["nsenter", f"--net=/run/netns/{NETNS}", *command]


def snakemake_on_slurm_command(workdir: Path, logs: Path, *args: str) -> list[str]:
    """Snakemake in ``workdir`` through ``profiles/slurm`` in the namespace, with this cluster's status command and
    first status check (the module's docstring) and SLURM's logs in ``logs``; ``args``: targets, then options."""
    return in_netns(
        *snakemake_in(workdir),
        "--profile",
        str(ROOT / "profiles" / "slurm"),
        "--slurm-status-command",
        "squeue",
        "--slurm-init-seconds-before-status-checks",
        "5",
        "--slurm-logdir",
        str(logs),
        *args,
    )


def snakemake_on_slurm(workdir: Path, logs: Path, *args: str, timeout: int) -> subprocess.CompletedProcess:
    """``snakemake_on_slurm_command`` run to its end, its output captured."""
    command = snakemake_on_slurm_command(workdir, logs, *args)
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, env=venv_on_path(), timeout=timeout)


@pytest.fixture(scope="module")
def slurm_partition():
    if os.environ.get("PIPELINE_HOST_TESTS") != "1":
        pytest.skip("changes the host (apt, /etc/slurm, munge, daemons): set PIPELINE_HOST_TESTS=1 to run it")
    if os.geteuid() != 0:
        pytest.skip("starting slurmctld/slurmd and munged needs root")
    started = subprocess.run(
        ["bash", str(ROOT / "tests" / "cluster" / "start_slurm.sh")],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "SLURM_TEST_NETNS": NETNS},
    )
    assert started.returncode == 0, started.stderr
    yield started.stdout.split()[-1]
    subprocess.run(["bash", str(ROOT / "tests" / "cluster" / "stop_slurm.sh")], timeout=120, check=True)
    query = time.monotonic()
    subprocess.run(["scontrol", "show", "config"], capture_output=True, timeout=60)
    assert time.monotonic() - query < 3, (
        "stop_slurm.sh left a slurm.conf naming a stopped controller: every later "
        "snakemake waits ~9 s for the SLURM plugin's `scontrol show config`"
    )


def localhost_site(
    tmp_path: Path, partition: str, max_runtime_min: int = 60, signal_lead_s: int = 600, **changes
) -> Path:
    """The example site with what this machine has: one partition, no GPUs, 1 CPU and 3 GB per job (``changes``:
    further keys, or other values of these)."""
    raw = yaml.safe_load((ROOT / "profiles" / "slurm" / "site.example.yaml").read_text())
    raw["site"].update(
        {
            "gpu_partition": partition,
            "cpu_partition": partition,
            "gpus_per_node": 0,
            "cpu_max_cpus": 1,
            "cpu_max_mem_mb": 3000,
            "max_runtime_min": max_runtime_min,
            "target_runtime_min": min(max_runtime_min, raw["site"]["target_runtime_min"]),
            "hf_home": str(tmp_path / "hf"),
            "signal_lead_s": signal_lead_s,
        }
        | changes
    )
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_tiny_dag_runs_offline_through_the_slurm_profile(tmp_path, slurm_partition):
    """A tiny run, its lm-eval, and the preflight job of the run's shape (on the same data jobs), each its own sbatch
    job sized by the site; the preflight row fills every column. As in the paper preset (``ray.num_cpus: null``),
    each job's embedded Ray counts the CPUs SLURM gave the job."""
    links = subprocess.run(["ip", "-n", NETNS, "-o", "link"], capture_output=True, text=True, check=True).stdout
    assert [line.split(":")[1].strip() for line in links.splitlines()] == ["lo"]
    run = "results/tiny/runs/owt-large-gpt/summary.json"
    downstream = "results/tiny/downstream/owt-large-gpt/downstream.csv"
    preflight = "results/tiny/preflight/gpt-large-g0-mb0/row.json"
    started = time.monotonic()
    site, ray = f"site={localhost_site(tmp_path, slurm_partition)}", "ray={address: null, num_cpus: null}"
    targets = (run, downstream, preflight)
    result = snakemake_on_slurm(
        tmp_path, tmp_path / "slurm-logs", *targets, "--config", "preset=tiny", site, ray, timeout=1800
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-4000:]
    print(f"offline SLURM run: {time.monotonic() - started:.0f} s")
    submitted = set(re.findall(r"has been submitted with SLURM jobid (\d+)", output))
    assert len(submitted) == 7, output[-4000:]  # 2 corpora, tokenizer, cache, pretrain, downstream, preflight
    summary = json.loads((tmp_path / run).read_text())
    assert summary["family"] == "gpt" and summary["train_steps"] == 40
    provenance = json.loads((tmp_path / run.replace("summary", "provenance")).read_text())
    assert provenance["slurm_job_id"] in submitted
    assert provenance["ray"]["cluster_cpus"] == 1, "the job's embedded Ray counts the job's 1 CPU, not the node's 2"
    assert "tiny_choice" in (tmp_path / downstream).read_text()
    row = json.loads((tmp_path / preflight).read_text())
    assert row["status"] == "ok" and row["run_id"] == "owt-large-gpt", row
    empty = [column for column in COLUMNS if column != "verdict" and row.get(column) in ("", None)]
    assert empty == ["error"], row
    assert row["backend"] == "cpu" and row["peak_source"].startswith("CPU peak measured in this job"), row


def test_ray_cluster_sbatch_runs_its_driver_inside_the_allocation_with_token_auth(tmp_path, slurm_partition):
    address_file, log = tmp_path / "ray-address", tmp_path / "ray.out"
    ray = str(Path(sys.executable).parent / "ray")
    env = {
        **os.environ,
        "RAY_ADDRESS_FILE": str(address_file),
        "RAY_PORT": "6391",
        "RAY": ray,
        "RAY_AUTH_TOKEN_PATH": str(tmp_path / "auth_token"),
    }
    driver = (
        "import os, ray; ray.init(); print('driver in job', os.environ['SLURM_JOB_ID'], ray.cluster_resources()['CPU'])"
    )
    submitted = subprocess.run(
        in_netns(
            "sbatch",
            "--parsable",
            "--nodes=1",
            f"--partition={slurm_partition}",
            "--exclusive=user",
            "--output",
            str(log),
            str(ROOT / "profiles" / "slurm" / "ray-cluster.sbatch"),
            sys.executable,
            "-c",
            driver,
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=True,
    )
    job_id = submitted.stdout.strip().split(";")[0]
    try:
        deadline = time.time() + 240
        while time.time() < deadline:
            state = subprocess.run(
                in_netns("squeue", "-h", "-j", job_id, "-o", "%T"), capture_output=True, text=True, timeout=30
            ).stdout.strip()
            if not state:
                break
            time.sleep(2)
        text = log.read_text()
        assert re.search(r"Ray cluster up at [0-9.]+:6391 on 1 node\(s\)", text), text[-3000:]
        assert f"driver in job {job_id}" in text, text[-3000:]
        assert (tmp_path / "auth_token").stat().st_size > 0
    finally:
        subprocess.run(in_netns("scancel", job_id), timeout=30)


def test_a_run_longer_than_the_walltime_limit_finishes_in_one_call_through_planned_chunks(
    tmp_path, slurm_partition, tiny_data_workdir
):
    """On a partition with a 1-minute limit, a tiny run whose training takes longer than that finishes in one
    ``snakemake --profile profiles/slurm`` call: the site's CPU device was measured
    (``results/benchmarks/throughput-sizes-cpu2.csv``), so the dry run plans the run as a chain of 1-minute jobs
    (a 0.5-minute start-up each, ``chunk_startup_min``) and gives its rule that chain's attempts. Each job is warned
    (SIGURG, ``signal_lead_s``: 2 s here, and SLURM may send it up to 30 s early), saves a checkpoint with its
    embedded Ray still up and stops; only the submitting Snakemake retries it (not the job's own, in the seconds left
    of its allocation), and the next job resumes from it, until the run has trained exactly its steps."""
    profile = yaml.safe_load((ROOT / "profiles" / "slurm" / "config.yaml").read_text())
    assert any(re.fullmatch(r"slurm_extra='--signal=URG@\d+'", item) for item in profile["default-resources"])
    workdir = tmp_path / "walltime"
    shutil.copytree(tiny_data_workdir, workdir, ignore=shutil.ignore_patterns("locks"))
    # ~100 s of updates on 2 idle cores (~25 per s, 2026-11-27): more than one job can train even if SLURM ends it
    # late. SLURM checks limits and sends --signal on a 30-s timer, so a 1-minute job can run ~90 s (one trained all of
    # 700 updates); jobs trained 170 to 1160 updates each.
    run, steps = "results/tiny/runs/wt103-small-gpt", 2400
    train = f"steps: {steps}, eval_every: {steps}, eval_batches: 1, checkpoint_every: {steps}"
    site = localhost_site(
        tmp_path, slurm_partition, max_runtime_min=1, signal_lead_s=2, device="cpu2", chunk_startup_min=0.5
    )
    started = time.monotonic()
    pretrain = f"pretrain={{wt103-small: {{train: {{{train}}}}}}}"
    config = ("--config", "preset=tiny", pretrain, f"site={site}")
    # 995 s in CI beside other load (11 jobs, up to 73 s each between a job's end and the plugin seeing it).
    result = snakemake_on_slurm(workdir, tmp_path / "logs", f"{run}/summary.json", *config, timeout=1800)
    output = result.stdout + result.stderr
    print(f"one call through chunks: {time.monotonic() - started:.0f} s")
    assert result.returncode == 0, output[-4000:]
    planned = int(re.search(r"chunks=(\d+)", output)[1])
    jobs = list(dict.fromkeys(re.findall(r"has been submitted with SLURM jobid (\d+)", output)))
    assert planned >= 2 and 2 <= len(jobs) <= planned + 2, (planned, jobs, output[-4000:])
    # The run's own log gathers every job's: each job after the first resumed from the checkpoint the one before it
    # saved last (a save "at step k" holds k + 1 updates).
    log = (workdir / "results" / "tiny" / "logs" / "pretrain" / "wt103-small-gpt.log").read_text()
    events = re.findall(
        r"Saving checkpoint at step (\d+)\.|Resuming wt103-small-gpt from checkpoint at step (\d+)",
        (workdir / run / "logs" / "wt103-small-gpt.log.log").read_text(),
    )
    resumes, saved = [], None
    for save, resume in events:
        if save:
            saved = int(save)
        else:
            assert saved is not None and int(resume) == saved + 1, events
            resumes.append(int(resume))
    # A job that SLURM warned before it had loaded the checkpoint stops without a resume of its own (the next job
    # resumes from the same save); every other job after the first resumed.
    assert 1 <= len(resumes) <= len(jobs) - 1, (resumes, jobs, events)
    assert not RAY_DIED.search(output + log), log[-3000:]
    summary = json.loads((workdir / run / "summary.json").read_text())
    assert summary["resumed_from_step"] == resumes[-1] > 0 and summary["steps_done"] == steps


def test_at_a_gpu_site_one_call_runs_the_preflight_and_stops_at_its_red_row_before_training(
    tmp_path, slurm_partition, tiny_data_workdir, site_fit_table
):
    """At a site with GPUs whose fit table is planned but whose preflight has not run, one ``snakemake --profile
    profiles/slurm`` call runs the preflight of every training shape and job kind on the GPU partition and writes its
    report before any training job: of the tiny preset trimmed to 2 of its 14 training shapes with every stage job kind
    (``results/gpu_site/``, where the tiny data is moved). The node's GPU is a GRES without a device
    (``start_slurm.sh``): SLURM grants ``--gpus``, and the jobs' JAX finds no GPU, as on a node whose jaxlib is
    CPU-only. Every preflight row is red (a stage job reading its source shape's checkpoint finds none), and the call
    stops before its first training job, naming a red row and what to do. (The fit table's own job in the same call is
    planned by the dry run, ``tests/planning/test_job_set.py``: on 2 CPUs it takes minutes.)"""
    preset = yaml.safe_load((ROOT / "pipeline" / "config" / "presets" / "tiny.yaml").read_text())
    preset["preset"], preset["finetune"]["directions"] = "gpu_site", [["owt", "wt103"]]
    preset["pretrain"] = {"owt-large": preset["pretrain"]["owt-large"]}
    preset["finetune"] |= {"diffeq_source": "large", "baseline_source": "large"}
    del preset["ablations"]["time_mlp_design"], preset["downstream"]["pairs"]["llama-1b"]
    for analysis in ("spectra", "lyapunov", "frontier"):
        preset["analysis"][analysis]["runs"] = ["owt-large-diffeq"]
    preset["analysis"]["memory"]["base"] = "owt-large"
    (preset_file := tmp_path / "gpu_site.yaml").write_text(yaml.safe_dump(preset))
    workdir = tmp_path / "gpu-site"
    shutil.copytree(tiny_data_workdir, workdir, ignore=shutil.ignore_patterns("locks"))
    (workdir / "results" / "tiny").rename(workdir / "results" / "gpu_site")
    site = localhost_site(
        tmp_path, slurm_partition, max_runtime_min=240, gpus_per_node=1, cpus_per_gpu=1, mem_mb_per_gpu=3000
    )
    report = site_fit_table(workdir, {}, site, preset=str(preset_file), markdown=True).with_name("preflight.csv")
    report.unlink()
    run = "results/gpu_site/runs/owt-large-gpt/summary.json"
    config = ("--config", f"preset={preset_file}", f"site={site}")
    result = snakemake_on_slurm(workdir, tmp_path / "logs", run, *config, timeout=1800)
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-4000:]
    rows = list(csv.DictReader(report.open()))
    shapes = {row["shape"] for row in rows}
    assert {"gpt-large-g1-mb8", "downstream"} <= shapes, shapes
    assert all(row["verdict"] == "failed" for row in rows), rows
    # A stage job that reads its source shape's checkpoint finds none: that shape's job trained nothing.
    refused = {row["shape"] for row in rows if "the job was given 1 GPU(s) but JAX" in row["error"]}
    assert {
        row["shape"] for row in rows if row["kind"] == "pretrain" or row["kind"].startswith("finetune")
    } <= refused, rows
    assert not re.search(r"rule (pretrain|finetune):", output) and not (workdir / run).exists(), output[-4000:]
    stop = re.search(
        r"results/gpu_site/preflight\.csv: the preflight of (?:shape|stage job) (\S+) \(.+?\) failed \(.+?\); fix that",
        " ".join(output.split()),
    )
    assert stop and stop[1] in shapes, output[-4000:]


def slurm_jobs(state: str) -> dict[str, str]:
    """The SLURM jobs in ``state`` (``squeue -t``: RUNNING, all), their comment (``rule_<rule>_wildcards_...``) by
    job id."""
    listed = subprocess.run(
        in_netns("squeue", "-h", "-t", state, "-o", "%i %k"), capture_output=True, text=True, timeout=30, check=True
    )
    return dict((line.split(maxsplit=1) + [""])[:2] for line in listed.stdout.splitlines())


def wait_for(condition, snakemake: subprocess.Popen, output: Path, timeout_s: float):
    """``condition()``'s first true value, looked at every 0.2 s while ``snakemake`` runs; fails with its output's
    tail where it ends or ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while snakemake.poll() is None and time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.2)
    pytest.fail(f"snakemake ended or {timeout_s} s passed first:\n{output.read_text()[-4000:]}")


def test_a_token_cache_stopped_by_its_walltime_warning_finishes_in_one_call_equal_to_a_one_job_build(
    tmp_path, slurm_partition, tiny_data_workdir
):
    """A token cache built by Levanter's Ray builder (``cache_builder: ray``: a data job that resumes) over the tiny
    corpus in 300-document shards finishes in one ``snakemake --profile profiles/slurm`` call across two SLURM jobs.
    The first gets SLURM's walltime warning once Levanter's ledger lists two finished shards: the test sends it
    (``scancel --signal=URG``, the signal ``--signal=URG@<lead>`` sends), where a real limit would stop a build of
    unknown length at an unknown point. It stops, keeping the ledger; the submitting Snakemake retries it (the
    profile's retries: the site's limit plans one job), and the next job resumes from the ledger without reading the
    finished shards again (made unreadable in between, keeping their size and times). Both splits' token ids and
    document offsets equal a one-job build's (the serial builder, in this process)."""
    workdir = tmp_path / "cache-chain"
    shutil.copytree(tiny_data_workdir, workdir, ignore=shutil.ignore_patterns("locks"))
    data = workdir / "results" / "tiny" / "data"
    corpus, tokenizer, cache = data / "corpora" / "shards", data / "tokenizers" / "bpe", data / "caches" / "shards-bpe"
    export_tiny_corpus("fortunes", corpus, docs_per_shard=300)  # what the corpus rule's job exports for this source
    reference = tmp_path / "one-job"
    one_job = ["--builder", "serial", "--out", str(reference)]
    assert main(["cache", "--corpus", str(corpus), "--tokenizer", str(tokenizer), *one_job]) == 0
    dataset = "datasets={shards: {title: fortunes, source: {kind: tiny, corpus: fortunes, docs_per_shard: 300}}}"
    site = localhost_site(tmp_path, slurm_partition, cpu_max_cpus=2)  # Levanter's Ray builder needs 2 CPUs
    # Each job's embedded Ray counts the CPUs SLURM gave the job (as the paper preset's).
    config = ("--config", "preset=tiny", f"site={site}", "cache_builder=ray", "ray={num_cpus: null}", dataset)
    command = snakemake_on_slurm_command(workdir, tmp_path / "logs", str(cache.relative_to(workdir)), *config)
    output, train = tmp_path / "snakemake.out", staging_directory(staging_directory(cache) / "train")
    started = time.monotonic()
    with output.open("w") as out:
        snakemake = subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, env=venv_on_path())
    try:

        def building_job():  # asks SLURM only once the ledger lists two shards
            running = slurm_jobs("RUNNING").items() if finished_shard_count(train) >= 2 else ()
            return next((job for job, comment in running if comment.startswith("rule_token_cache")), None)

        stopped_job = wait_for(building_job, snakemake, output, 900)
        subprocess.run(in_netns("scancel", "--signal=URG", stopped_job), timeout=30, check=True)
        wait_for(lambda: stopped_job not in slurm_jobs("PENDING,RUNNING,COMPLETING"), snakemake, output, 300)
        stop = STOPPED_AT.search((workdir / "results" / "tiny" / "logs" / "token_cache" / "shards-bpe.log").read_text())
        finished = whole_ledger(train, restore=True)["finished_shards"]  # as the next job reads it
        spoil_finished_shards(corpus, finished)  # the next job tokenizing one again would fail
        record = json.loads(data_attempt_file(cache).read_text())
        assert record["attempt"] == 1 and record["outcome"] == "stopped", record  # the next job had not begun
        assert stop and stop[1] == "SIGURG" and 1 <= int(stop[2]) < int(stop[3]), stop
        assert 1 <= len(finished) < int(stop[3]), finished
        returncode = snakemake.wait(timeout=900)
    finally:
        if snakemake.poll() is None:  # a failed assertion: Snakemake cancels its SLURM jobs on SIGTERM
            snakemake.terminate()
            snakemake.wait(timeout=120)
    text = output.read_text()
    print(f"token cache across SLURM jobs: {time.monotonic() - started:.0f} s")
    assert returncode == 0, text[-4000:]
    jobs = re.findall(r"submitted with SLURM jobid (\d+) \(log: \S*/logs/rule_token_cache/", text)
    assert len(jobs) >= 2 and jobs[0] == stopped_job, (jobs, stopped_job, text[-4000:])
    record = json.loads(data_attempt_file(cache).read_text())
    assert record["attempt"] == len(jobs) and record["outcome"] == "done", record
    assert record["from_step"] >= len(finished), (record, finished)  # the last job began from the ledger
    for split in ("train", "validation"):
        for chained, one_job in zip(token_arrays(cache, split), token_arrays(reference, split), strict=True):
            assert np.array_equal(chained, one_job), split
