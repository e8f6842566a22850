"""Each job's shape at a SLURM site (pipeline/planning/jobs.py): GPUs from a run's size and the site, the
micro-batch from the fit table."""

import dataclasses
import json

import pytest

from pipeline.config import load_preset, pretrain_runs
from pipeline.config.site import DEFAULT_CHUNK_STARTUP_MIN, EXAMPLE, load_site, preset_results
from pipeline.planning.cost import cost_rows
from pipeline.planning.grid import Grid
from pipeline.planning.jobs import JobSizing, training_gpus, training_minutes
from pipeline.planning.measured import MeasuredTable
from pipeline.planning.placement import CHAIN_MARGIN_RETRIES, JobRequest, Placement, WalltimeError, chunk_count
from pipeline.planning.preflight_jobs import CHECKPOINT_GB_PER_MIN, PREFLIGHT_BASE_MIN, preflight_minutes

SITE = load_site(EXAMPLE)
PAPER = load_preset({"preset": "paper"})
PAPER_GRID = Grid.load(PAPER)


def site_with(**changes):
    """The example site with ``changes``."""
    return dataclasses.replace(SITE, **changes)


def paper_jobs(site=SITE, **tables) -> JobSizing:
    """The paper preset's job sizing at ``site`` (default: the example site) with ``tables``."""
    return JobSizing(PAPER_GRID, site, **tables)


def test_a_training_run_gets_the_fewest_gpus_that_hold_its_state_and_meet_the_target_walltime():
    small = 100e6
    assert training_gpus(gpu_hours=2.0, parameters=small, batch_size=256, site=SITE) == 1
    # 40 GPU-hours x 2 = 80 h: 4 GPUs give 20 h + 30 min, within the 24 h target; 2 GPUs would not.
    assert training_gpus(gpu_hours=40.0, parameters=small, batch_size=256, site=SITE) == 4
    # 6.6 B parameters: 106 GB of AdamW state needs at least 3 GPUs of 40 GB each; 3 does not divide 256.
    assert training_gpus(gpu_hours=1.0, parameters=6.6e9, batch_size=256, site=SITE) == 4
    # Nothing meets the target: the most GPUs that divide the batch (6 does not divide 256, 8 does).
    assert training_gpus(gpu_hours=1e4, parameters=small, batch_size=256, site=SITE) == 8
    assert training_gpus(gpu_hours=1e4, parameters=small, batch_size=12, site=SITE) == 6
    assert training_minutes(gpu_hours=10.0, gpus=2, site=SITE) == 10 * 2 / 2 * 60 + 30


def test_a_sites_mfu_sets_the_estimated_gpu_hours_its_jobs_are_sized_by():
    """Where nothing was measured, a run's GPU-hours are estimated at the site's MFU: half the MFU, twice the hours
    and a walltime sized on them."""
    run = "owt-medium-gpt"
    full, half = paper_jobs(), paper_jobs(site_with(mfu=SITE.mfu / 2))
    assert half.gpu_hours(run) == pytest.approx(2 * full.gpu_hours(run))
    gpus = half.training(run).gpus
    assert half.training(run).needed_minutes == training_minutes(half.gpu_hours(run), gpus, SITE)


def test_paper_runs_are_sized_by_their_cost_capped_at_the_site_walltime():
    jobs = paper_jobs()
    small, biggest = jobs.training("wt103-small-gpt"), jobs.training("owt-llama1b-diffeq_llama")
    hours = jobs.gpu_hours("owt-llama1b-diffeq_llama")
    assert small.gpus < biggest.gpus == 8 and small.minutes < biggest.minutes
    training, needed = Placement("gpu", signal_lead_s=600, resumable=True), training_minutes(hours, 8, SITE)
    assert biggest == JobRequest(
        gpus=8, micro_batch=0, placement=training, cpus=64, mem_mb=512000, minutes=needed, needed_minutes=needed
    )
    capped = paper_jobs(site_with(max_runtime_min=600, gpu_model="h100", account="proj"))
    assert capped.training("owt-llama1b-diffeq_llama") == JobRequest(
        gpus=8,
        micro_batch=0,
        placement=dataclasses.replace(training, account="proj"),
        gpu_model="h100",
        cpus=64,
        mem_mb=512000,
        minutes=600,
        needed_minutes=needed,
        chunks=chunk_count(needed, 600, 600),
    )
    assert jobs.cpu("tokenizer") == JobRequest(
        placement=Placement("cpu"), cpus=1, mem_mb=16000, minutes=60, needed_minutes=60
    )
    assert jobs.gpu_analysis("frontier", "owt-large-diffeq").gpus == 1


def test_a_training_jobs_walltime_warning_comes_at_most_half_way_through_its_walltime():
    """SLURM sends no warning whose lead reaches back to the job's start: the site's 40-minute lead stays for a long
    run, but a job the site caps at 30 minutes, or a 20-minute preflight job of a run's shape, is warned half-way."""
    site = site_with(signal_lead_s=2400)
    long_run = paper_jobs(site).training("owt-llama1b-diffeq_llama")
    assert long_run.minutes > 80 and long_run.sbatch_flags == ("--signal=URG@2400",)
    assert dataclasses.replace(long_run, minutes=20).sbatch_flags == ("--signal=URG@600",)
    capped = paper_jobs(dataclasses.replace(site, max_runtime_min=70, reservation="paper"))
    assert capped.training("wt103-small-gpt").sbatch_flags == ("--reservation=paper", "--signal=URG@2100")
    assert capped.gpu_analysis("spectra", "owt-large-diffeq").sbatch_flags == ("--reservation=paper",)


SHORT_SITE = site_with(max_runtime_min=240, target_runtime_min=240, cpu_max_runtime_min=1440)
"""A cluster whose GPU partition allows 4 hours, its CPU partition a day."""


def short_site(max_runtime_min, **changes):
    """``SHORT_SITE`` whose GPU partition and target allow ``max_runtime_min``, with ``changes``."""
    return dataclasses.replace(
        SHORT_SITE, max_runtime_min=max_runtime_min, target_runtime_min=max_runtime_min, **changes
    )


def test_a_run_longer_than_its_partitions_limit_is_a_chain_of_chunks_that_covers_its_estimate():
    """Each chunk trains its walltime less the start-up and the warning's lead; the chain covers the run's
    estimated training minutes, and one chunk fewer would not."""
    jobs = paper_jobs(SHORT_SITE)
    llama = jobs.training("owt-llama1b-diffeq_llama")
    assert (llama.gpus, llama.minutes) == (8, 240) and llama.needed_minutes > 240
    trains = 240 - DEFAULT_CHUNK_STARTUP_MIN - SHORT_SITE.signal_lead_s / 60
    assert (llama.chunks - 1) * trains < llama.needed_minutes - DEFAULT_CHUNK_STARTUP_MIN <= llama.chunks * trains
    assert llama.chunks == jobs.training_chunks("owt-llama1b-diffeq_llama") >= 5
    small = jobs.training("wt103-small-gpt")
    assert small.chunks == 1 and small.minutes == small.needed_minutes <= 240
    assert chunk_count(100, 240, 600) == 1 and chunk_count(500, 240, 600) == 3 and chunk_count(500, 40, 600) == 0


def test_each_chunks_start_up_is_the_sites_and_a_run_without_gpus_is_chunked_where_its_device_was_measured():
    """A site's ``chunk_startup_min`` sets what each chunk spends starting. At a site without GPUs a run is one CPU
    job: estimated from the site device's measured throughput (``throughput-sizes-cpu2.csv``), a run longer than a
    1-minute limit is a chain with that chain's attempts; on a device nobody measured, its need is unknown and it
    gets the whole limit."""
    slow_start = paper_jobs(dataclasses.replace(SHORT_SITE, chunk_startup_min=60)).training("owt-llama1b-diffeq_llama")
    default = paper_jobs(SHORT_SITE).training("owt-llama1b-diffeq_llama")
    assert slow_start.needed_minutes == default.needed_minutes + 30
    assert slow_start.chunks == chunk_count(slow_start.needed_minutes, 240, 600, 60) > default.chunks
    tiny = load_preset({"preset": "tiny", "pretrain": {"wt103-small": {"train": {"steps": 240}}}})
    limits = {"max_runtime_min": 1, "target_runtime_min": 1, "signal_lead_s": 2, "chunk_startup_min": 0.5}
    cpu_site = site_with(gpus_per_node=0, gpu_model=None, device="cpu2", **limits)
    jobs = JobSizing(Grid.load(tiny), cpu_site)
    run = jobs.training("wt103-small-gpt")
    assert jobs.measured.tokens_per_s(jobs.grid.workloads["wt103-small-gpt"])[1] == "measured"
    assert run.needed_minutes == training_minutes(jobs.gpu_hours("wt103-small-gpt"), 1, cpu_site) > 1
    assert (run.gpus, run.minutes) == (0, 1) and run.chunks == chunk_count(run.needed_minutes, 1, 2, 0.5) >= 2
    assert jobs.chain_retries(["wt103-small-gpt"]) == run.chunks - 1 + CHAIN_MARGIN_RETRIES
    unmeasured = JobSizing(Grid.load(tiny), dataclasses.replace(cpu_site, device="h100"))
    assert unmeasured.training("wt103-small-gpt") == dataclasses.replace(run, needed_minutes=None, chunks=1)
    with pytest.raises(WalltimeError, match="after each job's 50-min start-up .chunk_startup_min."):
        paper_jobs(short_site(max_runtime_min=60, chunk_startup_min=50)).training("owt-llama1b-diffeq_llama")


def test_no_job_that_cannot_resume_is_clipped_to_the_partitions_limit():
    assert paper_jobs(SHORT_SITE).gpu_analysis("frontier", "owt-large-diffeq").minutes == 240
    with pytest.raises(
        WalltimeError,
        match="frontier of run owt-large-diffeq needs an estimated 240 min but partition 'gpu' allows 200 min",
    ):
        paper_jobs(short_site(max_runtime_min=200)).gpu_analysis("frontier", "owt-large-diffeq")
    with pytest.raises(
        WalltimeError,
        match=r"run wt103-small-gpt needs an estimated \d+ min but partition "
        "'gpu' allows 40 min, too few to train",
    ):
        paper_jobs(short_site(max_runtime_min=40)).training("wt103-small-gpt")


def test_a_preflight_job_gets_its_runs_own_walltime_and_is_warned_only_after_its_work():
    """Llama-1B's preflight job: two start-ups, 23 updates, and a save and a restore of its ~80 GB checkpoint, with
    the site's 10-minute warning after them (a fixed 20 minutes warned it after 10)."""
    from pipeline.planning.preflight_jobs import PREFLIGHT_RUNTIME_MIN, training_shapes

    jobs = paper_jobs()
    hours = jobs.gpu_hours("owt-llama1b-diffeq_llama")
    parameters = jobs.grid.workloads["owt-llama1b-diffeq_llama"].parameters
    work = PREFLIGHT_BASE_MIN + 23 * hours * 2 / 8 / 40000 * 60 + 2 * parameters * 12 / 1e9 / CHECKPOINT_GB_PER_MIN
    minutes = preflight_minutes(jobs, "owt-llama1b-diffeq_llama", 23)
    assert work + 10 <= minutes < work + 11 and parameters * 12 > 75e9
    lead = dataclasses.replace(jobs.training("owt-llama1b-diffeq_llama"), minutes=minutes).sbatch_flags
    assert lead == ("--signal=URG@600",) and minutes - 10 >= work
    shapes = training_shapes(jobs)
    assert shapes["diffeq_llama-llama1b-g8-mb0"].minutes == minutes > PREFLIGHT_RUNTIME_MIN
    assert min(shape.minutes for shape in shapes.values()) >= PREFLIGHT_RUNTIME_MIN
    with pytest.raises(
        WalltimeError,
        match="the preflight job of run owt-llama1b-diffeq_llama needs an estimated "
        rf"{minutes} min but partition 'gpu' allows 30 min",
    ):
        preflight_minutes(
            paper_jobs(site_with(max_runtime_min=30, target_runtime_min=30)), "owt-llama1b-diffeq_llama", 23
        )


def test_without_a_site_every_job_is_local_on_the_cpu():
    jobs = JobSizing(Grid.load(load_preset({"preset": "tiny"})), None)
    assert jobs.cpu("corpus") == JobRequest() and jobs.training("owt-small-gpt") == JobRequest(micro_batch=0)


def write_fit_rows(path, rows):
    from pipeline.planning.fit import fit_table

    path.write_text(fit_table(rows)[1])
    return path


def test_a_training_job_takes_its_micro_batch_from_the_fit_row_planned_at_its_gpus(tmp_path, planned_fit_row):
    """owt-small-gpt gets 1 GPU at the example site: its row at 1 GPU of 80 GB gives the micro-batch, unless the
    preset sets one; a row planned at 8 GPUs, or for another memory, is not this job's: without a row a job would
    train its whole per-GPU batch at once (at paper scale: out of memory), so it stops the DAG build in one sentence
    naming the command that plans the row."""
    lora = planned_fit_row(PAPER, "ft-wt103-owt-diffeq18-n9-lora", 1, 8, device_bytes=141 * 10**9)
    rows = [planned_fit_row(PAPER, "owt-small-gpt", 1, 16), planned_fit_row(PAPER, "owt-small-diffeq", 8, 64), lora]
    table = write_fit_rows(tmp_path / "fit.csv", rows)
    jobs = paper_jobs(fit_table=table)
    assert [jobs.gpu_count(run) for run in ("owt-small-gpt", "owt-small-diffeq")] == [1, 1]
    assert jobs.training("owt-small-gpt").micro_batch == 16
    chosen = load_preset({"preset": "paper", "pretrain": {"owt-small": {"train": {"micro_batch_size": 8}}}})
    chosen_shape = JobSizing(Grid.load(chosen), SITE, fit_table=table).training("owt-small-gpt")
    assert chosen_shape.micro_batch == 8, "a micro-batch the preset sets wins over the table's"
    wrong = load_preset({"preset": "paper", "pretrain": {"owt-medium": {"train": {"micro_batch_size": 96}}}})
    with pytest.raises(ValueError) as error:
        JobSizing(Grid.load(wrong), SITE, fit_table=table).training("owt-medium-gpt")
    assert str(error.value) == (
        "run owt-medium-gpt: the preset's train.micro_batch_size 96 does not divide its batch of 128 per GPU on the 2 "
        "GPU(s) the site gives it; set a divisor of 128 (the fit table plans one)."
    )
    with pytest.raises(ValueError) as error:
        jobs.training("owt-small-diffeq")
    assert str(error.value) == (
        f"{table}: no row for owt-small-diffeq on 1 GPU(s) of 80 GB (the preflight's throughput gave it GPUs the "
        "table was not planned for); plan it with `snakemake --profile profiles/slurm fit` and this call's --config, "
        "or set its train.micro_batch_size in the preset."
    )
    for run_id in ("ft-wt103-owt-diffeq18-n9-lora", "owt-medium-gpt"):
        with pytest.raises(ValueError, match=f"no row for {run_id} on "):
            jobs.training(run_id)


def test_a_job_that_fits_at_no_micro_batch_stops_the_workflow_with_one_sentence(tmp_path, planned_fit_row):
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(PAPER, "owt-small-gpt", 1, 1, fits=False)])
    with pytest.raises(
        ValueError,
        match="run owt-small-gpt does not fit in 80 GB per GPU on 1 GPU.s. even at "
        "micro-batch 1; give it more GPUs .a lower target_runtime_min.",
    ):
        paper_jobs(fit_table=table).training("owt-small-gpt")


def test_a_row_planned_for_another_shape_or_memory_share_of_the_run_is_stale(tmp_path, planned_fit_row, monkeypatch):
    """A row holds for the run as the preset defined it when it was planned: another attention shape (16 heads of
    48: the same run id, batch, cost and GPUs) or a different share of GPU memory for JAX makes it stale, named in
    one sentence; a new learning rate or step count leaves the plan, and the row, valid."""
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(PAPER, "owt-small-gpt", 1, 16)])
    retuned = load_preset({"preset": "paper", "pretrain": {"owt-small": {"train": {"lr": 1e-4, "steps": 1000}}}})
    assert JobSizing(Grid.load(retuned), SITE, fit_table=table).training("owt-small-gpt").micro_batch == 16
    reshaped = load_preset({"preset": "paper", "sizes": {"small": {"num_heads": 16}}})
    with pytest.raises(ValueError) as error:
        JobSizing(Grid.load(reshaped), SITE, fit_table=table).training("owt-small-gpt")
    assert str(error.value) == (
        f"{table}: the row of owt-small-gpt on 1 GPU(s) is stale: a field of its model, its vocabulary, "
        "train.dropout, train.mixed_precision, its fine-tune's source_euler_steps/euler_steps/method/lora_rank/"
        "train_embeddings, or the train step's version changed since it was planned; plan it with `snakemake "
        "--profile profiles/slurm fit` and this call's --config."
    )
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75")
    with pytest.raises(
        ValueError,
        match="planned for 72 GB usable per GPU, but JAX now reserves 60 GB "
        r"\(XLA_PYTHON_CLIENT_MEM_FRACTION\); plan it with",
    ):
        paper_jobs(fit_table=table).training("owt-small-gpt")


def test_a_memory_probe_gets_one_nodes_gpus_and_must_fit_its_whole_batch_there(tmp_path, planned_fit_row):
    """Fig. 16's probes measure one step of the whole batch of 256, never accumulated: on the example site's
    8-GPU nodes each gets 8 GPUs (whatever its base run trains on), and a fit row saying the whole batch does not
    fit there, or none at all, stops the workflow in one sentence."""
    probe = "owt-medium-memory-gpt"
    jobs = paper_jobs()
    assert (jobs.memory_probe(probe).gpus, jobs.gpu_count("owt-medium-gpt")) == (8, 2)
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(PAPER, probe, 8, 16, fits_at_paper_batch=False)])
    with pytest.raises(ValueError) as error:
        paper_jobs(fit_table=table).memory_probe(probe)
    assert str(error.value) == (
        f"{table}: memory probe {probe} does not fit its whole batch of 256 on 8 GPU(s) of 80 GB, and a probe "
        "measures one step of the whole batch (Fig. 16); give the site GPUs with more memory (gpu_memory_gb) or "
        "more per node (gpus_per_node), then plan it with `snakemake --profile profiles/slurm fit` and this call's "
        "--config."
    )
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(PAPER, probe, 8, 32)])
    assert paper_jobs(fit_table=table).memory_probe(probe).gpus == 8
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(PAPER, "owt-small-gpt", 1, 16)])
    with pytest.raises(
        ValueError,
        match=f"memory probe {probe} does not fit its whole batch of 256 on 8 GPU.s. of 80 GB .no row.",
    ):
        paper_jobs(fit_table=table).memory_probe(probe)


def test_passes_over_the_data_count_the_cache_built_under_the_sites_results_dir(tmp_path):
    """A job's cost at a site (``status --site``) reads the token cache its grid built, under its ``results_dir``."""
    config = load_preset({"preset": "tiny"})
    spec = pretrain_runs(config)["wt103-small-gpt"]
    stats = tmp_path / "tiny" / "data" / "caches" / f"{spec.dataset}-{spec.tokenizer}" / "stats.json"
    stats.parent.mkdir(parents=True)
    stats.write_text(json.dumps({"train": {"tokens": 1000}}))
    site = site_with(results_dir=str(tmp_path))
    workload = Grid.load(config).pretraining["wt103-small-gpt"]
    measured = MeasuredTable(Grid.load(config), site.device, mfu=site.mfu)
    row = cost_rows([workload], measured, preset_results(site, "tiny"))[0]
    tokens = spec.train.steps * spec.train.batch_size * spec.model.seq_len
    assert row["data_passes"] == pytest.approx(tokens / 1000)
