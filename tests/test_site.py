"""Site settings (profiles/slurm/site.example.yaml) and per-run job sizing (pipeline/site.py)."""

import dataclasses

import pytest
import yaml

from pipeline.config import REPO_ROOT, load_preset
from pipeline.site import EXAMPLE, JobResources, load_site, slurm_allocation, training_gpus, training_minutes

SITE = load_site(EXAMPLE)


def write_site(tmp_path, **changes):
    raw = yaml.safe_load(EXAMPLE.read_text())
    raw["site"].update(changes)
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_the_example_site_loads_with_its_documented_values():
    assert (SITE.gpu_partition, SITE.cpu_partition, SITE.gpus_per_node, SITE.max_runtime_min) == ("gpu", "cpu", 8, 2880)


@pytest.mark.parametrize(("changes", "sentence"), [
    ({"partition": "gpu"}, "unknown key 'site.partition'"),
    ({"gpus_per_node": -1}, "key 'site.gpus_per_node' must be a non-negative number (got -1)"),
    ({"safety_factor": float("nan")}, "key 'site.safety_factor' must be a positive number"),
    ({"cpu_partition": ""}, "key 'site.cpu_partition' must be a non-empty string"),
    ({"gpus_per_node": 0, "gpu_model": "h100"}, "key 'site.gpu_model' is 'h100' but 'site.gpus_per_node' is 0"),
])
def test_a_bad_site_key_fails_with_one_sentence(tmp_path, changes, sentence):
    with pytest.raises(ValueError, match=sentence.replace("(", r"\(").replace(")", r"\)")):
        load_site(write_site(tmp_path, **changes))


def test_a_missing_site_key_names_it_and_the_example(tmp_path):
    raw = yaml.safe_load(EXAMPLE.read_text())
    del raw["site"]["account"]
    path = tmp_path / "site.yaml"
    path.write_text(yaml.safe_dump(raw))
    with pytest.raises(ValueError, match=f"key 'site.account' is missing; copy it from {EXAMPLE}"):
        load_site(path)


def test_site_paths_relative_to_the_repository_missing_file_and_hf_home_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("SITE_TEST_USER", "alice")
    path = write_site(tmp_path, hf_home="/shared/$SITE_TEST_USER/hf")
    assert load_site(path).hf_home == "/shared/alice/hf"
    missing = tmp_path / "missing" / "site.yaml"
    with pytest.raises(FileNotFoundError, match=f"site settings {missing} do not exist; copy {EXAMPLE} to it"):
        load_site(missing)
    assert load_site(EXAMPLE.relative_to(REPO_ROOT)) == SITE


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


def test_paper_runs_are_sized_by_their_cost_capped_at_the_site_walltime():
    paper = load_preset({"preset": "paper"})
    jobs = JobResources(paper, SITE)
    small, biggest = jobs.training("pretrain", "wt103-small-gpt"), jobs.training("pretrain", "owt-llama1b-diffeq_llama")
    hours = jobs.cost("pretrain", "owt-llama1b-diffeq_llama")["gpu_hours"]
    assert small["gpu"] < biggest["gpu"] == 8 and small["runtime"] < biggest["runtime"]
    assert biggest == {"slurm_partition": "gpu", "nodes": 1, "gpu": 8, "cpus_per_task": 64, "mem_mb": 512000,
                       "runtime": training_minutes(hours, 8, SITE), "micro_batch": 0}
    capped = JobResources(paper, dataclasses.replace(SITE, max_runtime_min=600, gpu_model="h100", account="proj"))
    assert capped.training("pretrain", "owt-llama1b-diffeq_llama") == {
        "slurm_partition": "gpu", "slurm_account": "proj", "nodes": 1, "gpu": 8, "gpu_model": "h100",
        "cpus_per_task": 64, "mem_mb": 512000, "runtime": 600, "micro_batch": 0}
    assert jobs.cpu("token_cache") == {"slurm_partition": "cpu", "nodes": 1, "gpu": 0, "cpus_per_task": 32,
                                       "mem_mb": 128000, "runtime": 720}
    assert jobs.gpu_analysis("frontier", "owt-large-diffeq")["gpu"] == 1


def test_without_a_site_every_job_is_local_on_the_cpu():
    jobs = JobResources(load_preset({"preset": "tiny"}), None)
    assert jobs.cpu("corpus") == {"gpu": 0} and jobs.training("pretrain", "owt-small-gpt") == {"gpu": 0,
                                                                                                "micro_batch": 0}
    assert jobs.resource_keys(gpu=True) == ["gpu"]


def write_fit_rows(path, rows):
    from pipeline.bench.fit import fit_table

    path.write_text(fit_table(rows)[1])
    return path


def test_a_training_job_without_a_planned_row_stops_the_workflow_unless_its_preset_sets_a_micro_batch(tmp_path):
    """Without a fit row a job would train its whole per-GPU batch at once (at paper scale: out of memory), so it
    stops the DAG build in one sentence; a micro-batch the preset sets is used as it is."""
    table = write_fit_rows(tmp_path / "fit.csv", [])
    config = load_preset({"preset": "paper"})
    with pytest.raises(ValueError) as error:
        JobResources(config, SITE, fit_table=table).training("pretrain", "owt-small-gpt")
    assert str(error.value) == (
        f"{table}: no row for owt-small-gpt on 1 GPU(s) of 80 GB, so it would train its whole per-GPU batch at once; "
        "plan the runs first (snakemake --profile slurm fit) or set its train.micro_batch_size in the preset.")
    runs = config["pretrain"]["owt-small"]
    config["pretrain"]["owt-small"] = {**runs, "train": {**runs["train"], "micro_batch_size": 8}}
    assert JobResources(config, SITE, fit_table=table).training("pretrain", "owt-small-gpt")["micro_batch"] == 8


def test_a_training_job_takes_its_micro_batch_from_the_fit_row_planned_at_its_gpus(tmp_path, planned_fit_row):
    """owt-small-gpt gets 1 GPU at the example site: its row at 1 GPU of 80 GB gives the micro-batch, unless the
    preset sets one; a row planned at 8 GPUs, or for another memory, is not this job's (so the job has no row)."""
    config = load_preset({"preset": "paper"})
    table = write_fit_rows(tmp_path / "fit.csv", [
        planned_fit_row(config, "owt-small-gpt", 1, 16), planned_fit_row(config, "owt-small-diffeq", 8, 64),
        planned_fit_row(config, "ft-wt103-owt-diffeq18-n9-lora", 1, 8, device_bytes=141 * 10**9)])
    jobs = JobResources(config, SITE, fit_table=table)
    assert [jobs.training_gpu_count("pretrain", run) for run in ("owt-small-gpt", "owt-small-diffeq")] == [1, 1]
    assert jobs.training("pretrain", "owt-small-gpt")["micro_batch"] == 16
    runs = config["pretrain"]["owt-small"]
    chosen = {**config, "pretrain": {**config["pretrain"], "owt-small": {
        **runs, "train": {**runs["train"], "micro_batch_size": 8}}}}
    assert JobResources(load_preset(chosen), SITE, fit_table=table).training("pretrain", "owt-small-gpt")[
        "micro_batch"] == 8, "a micro-batch the preset sets wins over the table's"
    wrong = {**config, "pretrain": {**config["pretrain"], "owt-medium": {
        **config["pretrain"]["owt-medium"], "train": {**config["pretrain"]["owt-medium"]["train"],
                                                      "micro_batch_size": 96}}}}
    with pytest.raises(ValueError) as error:
        JobResources(load_preset(wrong), SITE, fit_table=table).training("pretrain", "owt-medium-gpt")
    assert str(error.value) == (
        "run owt-medium-gpt: the preset's train.micro_batch_size 96 does not divide its batch of 128 per GPU on the 2 "
        "GPU(s) the site gives it; set a divisor of 128 (the fit table plans one: snakemake --profile slurm fit).")
    for stage, run_id in (("pretrain", "owt-small-diffeq"), ("finetune", "ft-wt103-owt-diffeq18-n9-lora"),
                          ("pretrain", "owt-medium-gpt")):
        with pytest.raises(ValueError, match=f"no row for {run_id} on "):
            jobs.training(stage, run_id)
    assert "micro_batch" in jobs.resource_keys(gpu=True, training=True)


def test_a_job_that_fits_at_no_micro_batch_stops_the_workflow_with_one_sentence(tmp_path, planned_fit_row):
    config = load_preset({"preset": "paper"})
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(config, "owt-small-gpt", 1, 1, fits=False)])
    jobs = JobResources(config, SITE, fit_table=table)
    with pytest.raises(ValueError, match="run owt-small-gpt does not fit in 80 GB per GPU on 1 GPU.s. even at "
                                         "micro-batch 1; give it more GPUs .a lower target_runtime_min."):
        jobs.training("pretrain", "owt-small-gpt")


def test_a_row_planned_for_another_shape_or_memory_share_of_the_run_is_stale(tmp_path, planned_fit_row,
                                                                             monkeypatch):
    """A row holds for the run as the preset defined it when it was planned: another attention shape (16 heads of
    48: the same run id, batch, cost and GPUs) or a different share of GPU memory for JAX makes it stale, named in
    one sentence; a new learning rate or step count leaves the plan, and the row, valid."""
    config = load_preset({"preset": "paper"})
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(config, "owt-small-gpt", 1, 16)])
    runs = config["pretrain"]["owt-small"]
    retuned = {**config, "pretrain": {**config["pretrain"], "owt-small": {
        **runs, "train": {**runs["train"], "lr": 1e-4, "steps": 1000}}}}
    assert JobResources(load_preset(retuned), SITE, fit_table=table).training("pretrain", "owt-small-gpt")[
        "micro_batch"] == 16
    reshaped = {**config, "sizes": {**config["sizes"], "small": {**config["sizes"]["small"], "num_heads": 16}}}
    with pytest.raises(ValueError) as error:
        JobResources(load_preset(reshaped), SITE, fit_table=table).training("pretrain", "owt-small-gpt")
    assert str(error.value) == (
        f"{table}: the row of owt-small-gpt on 1 GPU(s) was planned for another model, batch or fine-tune of that "
        "run than the preset now defines; plan it again (snakemake --profile slurm fit).")
    monkeypatch.setenv("XLA_PYTHON_CLIENT_MEM_FRACTION", "0.75")
    with pytest.raises(ValueError, match="planned for 72 GB usable per GPU, but JAX now reserves 60 GB "
                                         r"\(XLA_PYTHON_CLIENT_MEM_FRACTION\); plan it again"):
        JobResources(config, SITE, fit_table=table).training("pretrain", "owt-small-gpt")


def test_a_memory_probe_gets_one_nodes_gpus_and_must_fit_its_whole_batch_there(tmp_path, planned_fit_row):
    """Fig. 16's probes measure one step of the whole batch of 256, never accumulated: on the example site's
    8-GPU nodes each gets 8 GPUs (whatever its base run trains on), and a fit row saying the whole batch does not
    fit there, or none at all, stops the workflow in one sentence."""
    config = load_preset({"preset": "paper"})
    probe = "owt-medium-memory-gpt"
    jobs = JobResources(config, SITE)
    assert (jobs.memory_probe(probe)["gpu"], jobs.training_gpu_count("pretrain", "owt-medium-gpt")) == (8, 2)
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(config, probe, 8, 16, fits_at_paper_batch=False)])
    with pytest.raises(ValueError) as error:
        JobResources(config, SITE, fit_table=table).memory_probe(probe)
    assert str(error.value) == (
        f"{table}: memory probe {probe} does not fit its whole batch of 256 on 8 GPU(s) of 80 GB, and a probe "
        "measures one step of the whole batch (Fig. 16); give the site GPUs with more memory (gpu_memory_gb) or "
        "more per node (gpus_per_node), then rerun `fit`.")
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(config, probe, 8, 32)])
    assert JobResources(config, SITE, fit_table=table).memory_probe(probe)["gpu"] == 8
    table = write_fit_rows(tmp_path / "fit.csv", [planned_fit_row(config, "owt-small-gpt", 1, 16)])
    with pytest.raises(ValueError, match=f"no row for memory probe {probe} on 8 GPU.s. of 80 GB, so nothing says "
                                         "its whole batch fits there; plan it first"):
        JobResources(config, SITE, fit_table=table).memory_probe(probe)


def test_an_embedded_ray_inside_a_slurm_job_counts_the_jobs_cpus_and_gpus_not_the_nodes():
    job = {"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "16", "CUDA_VISIBLE_DEVICES": "2,3"}
    assert slurm_allocation(job) == {"num_cpus": 16, "num_gpus": 2}
    assert slurm_allocation({**job, "CUDA_VISIBLE_DEVICES": ""}) == {"num_cpus": 16, "num_gpus": 0}
    assert slurm_allocation({"SLURM_CPUS_PER_TASK": "16"}) == {}


def test_run_on_ray_in_a_slurm_job_starts_ray_with_the_jobs_cpus_and_jax_reserves_the_planned_memory(monkeypatch):
    """The task sees the job's CPUs, and its JAX reserves the share of GPU memory the fit table plans against
    (JAX's own default, 75 %, would make a plan that fits in 90 % fail)."""


    from pipeline.runner import run_on_ray

    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    cpus, fraction = (run_on_ray("ray:cluster_resources", address=None)["CPU"],
                      run_on_ray("os:getenv", "XLA_PYTHON_CLIENT_MEM_FRACTION", address=None))
    assert (cpus, fraction) == (1, "0.9")
