"""Site settings (profiles/slurm/site.example.yaml, pipeline/config/site.py) and the SLURM allocation a job reads."""

import pytest
from cli_testkit import example_site

from pipeline.config import REPO_ROOT
from pipeline.config.site import EXAMPLE, load_site
from pipeline.execution.job_env import slurm_allocation

SITE = load_site(EXAMPLE)


def test_the_example_site_loads_with_its_documented_values():
    assert (SITE.gpu_partition, SITE.cpu_partition, SITE.gpus_per_node, SITE.max_runtime_min) == ("gpu", "cpu", 8, 2880)


@pytest.mark.parametrize(
    ("changes", "sentence"),
    [
        ({"partition": "gpu"}, "unknown key 'partition' under 'site'"),
        ({"gpus_per_node": -1}, "key 'site.gpus_per_node' must be ≥ 0 (got -1)"),
        ({"gpus_per_node": 2.0}, "key 'site.gpus_per_node' must be an integer (got 2.0"),
        ({"safety_factor": float("nan")}, "key 'site.safety_factor' must be a finite number (got nan)"),
        ({"cpu_partition": ""}, "key 'site.cpu_partition' violates minLength=1 (got '')"),
        ({"gpus_per_node": 0, "gpu_model": "h100"}, "key 'site.gpu_model' is 'h100' but 'site.gpus_per_node' is 0"),
        ({"offline_nodes": True, "hf_home": None}, "key 'site.hf_home' is null but 'site.offline_nodes' is true"),
        ({"qos": ""}, "key 'site.qos' violates minLength=1"),
        ({"slurm_extra": {"training": "--exclusive"}}, "key 'site.slurm_extra' is missing required key 'gpu'"),
        ({"signal_lead_s": -1}, "key 'site.signal_lead_s' must be ≥ 0 (got -1)"),
        (
            {"max_runtime_min": 240, "target_runtime_min": 1440},
            "key 'site.target_runtime_min' (1440) exceeds 'site.max_runtime_min' (240), so no run could be sized",
        ),
        (
            {"slurm_extra": {"training": "--exclusive --time=10:00", "gpu": None, "cpu": None}},
            "key 'site.slurm_extra.training' sets --time, which the SLURM executor plugin sets itself",
        ),
        (
            {"slurm_extra": {"training": None, "gpu": "--gres=gpu:1", "cpu": None}},
            "key 'site.slurm_extra.gpu' sets --gres, which the SLURM executor plugin sets itself",
        ),
        (
            {"slurm_extra": {"training": None, "gpu": None, "cpu": "-J data"}},
            "key 'site.slurm_extra.cpu' sets --job-name, which the SLURM executor plugin sets itself",
        ),
        ({"cpu_max_runtime_min": 0}, "key 'site.cpu_max_runtime_min' must be ≥ 1 (got 0)"),
        ({"chunk_startup_min": -1}, "key 'site.chunk_startup_min' must be ≥ 0 (got -1)"),
        (
            {"max_runtime_min": 30, "target_runtime_min": 30, "chunk_startup_min": 30},
            "key 'site.chunk_startup_min' (30) is not below 'site.max_runtime_min' (30)",
        ),
    ],
)
def test_a_bad_site_key_fails_with_one_sentence(tmp_path, changes, sentence):
    with pytest.raises(ValueError, match=sentence.replace("(", r"\(").replace(")", r"\)")):
        load_site(example_site(tmp_path / "site.yaml", **changes))


@pytest.mark.parametrize(
    ("key", "changes", "meaning"),
    [
        ("chunk_startup_min", {}, lambda site: site.chunk_startup_min == SITE.chunk_startup_min == 30),
        (
            "cpu_max_runtime_min",
            {"max_runtime_min": 240, "target_runtime_min": 240},
            lambda site: site.cpu_max_runtime_min is None and site.partition_limit_min(site.cpu_partition) == 240,
        ),
    ],
)
def test_a_site_file_without_an_optional_key_loads_with_its_default(tmp_path, key, changes, meaning):
    """A site file written before the key existed: 30 minutes per chunk; the CPU partition at the GPU one's limit."""
    assert meaning(load_site(example_site(tmp_path / "site.yaml", (key,), **changes)))


def test_each_partition_has_its_own_walltime_limit(tmp_path):
    site = load_site(
        example_site(tmp_path / "site.yaml", max_runtime_min=240, target_runtime_min=240, cpu_max_runtime_min=1440)
    )
    assert (site.partition_limit_min("gpu"), site.partition_limit_min("cpu")) == (240, 1440)
    assert (SITE.partition_limit_min("gpu"), SITE.partition_limit_min("cpu")) == (2880, 2880)


def test_a_missing_site_key_names_it_and_the_example(tmp_path):
    with pytest.raises(
        ValueError, match=f"key 'site' is missing required key 'account' .every key is described in {EXAMPLE}.."
    ):
        load_site(example_site(tmp_path / "site.yaml", ("account",)))


def test_site_paths_relative_to_the_repository_missing_file_and_hf_home_variables(tmp_path, monkeypatch):
    monkeypatch.setenv("SITE_TEST_USER", "alice")
    path = example_site(
        tmp_path / "site.yaml", hf_home="/shared/$SITE_TEST_USER/hf", results_dir="/scratch/$SITE_TEST_USER/r"
    )
    assert (load_site(path).hf_home, load_site(path).results_dir) == ("/shared/alice/hf", "/scratch/alice/r")
    missing = tmp_path / "missing" / "site.yaml"
    with pytest.raises(FileNotFoundError, match=f"site settings {missing} do not exist; copy {EXAMPLE} to it"):
        load_site(missing)
    assert load_site(EXAMPLE.relative_to(REPO_ROOT)) == SITE


def test_an_embedded_ray_inside_a_slurm_job_counts_the_jobs_cpus_and_gpus_not_the_nodes():
    job = {"SLURM_JOB_ID": "7", "SLURM_CPUS_PER_TASK": "16", "CUDA_VISIBLE_DEVICES": "2,3"}
    assert slurm_allocation(job) == {"num_cpus": 16, "num_gpus": 2}
    assert slurm_allocation({**job, "CUDA_VISIBLE_DEVICES": ""}) == {"num_cpus": 16, "num_gpus": 0}
    assert slurm_allocation({"SLURM_CPUS_PER_TASK": "16"}) == {}


def test_a_slurm_job_without_cpus_per_task_counts_its_cpus_on_the_node():
    """A job that did not ask ``--cpus-per-task`` (an ``sbatch`` script of one's own) has ``SLURM_CPUS_ON_NODE``
    only: that count stands for the job's CPUs; ``SLURM_CPUS_PER_TASK`` wins where set."""
    step = {"SLURM_JOB_ID": "7", "SLURM_CPUS_ON_NODE": "4", "CUDA_VISIBLE_DEVICES": "0"}
    assert slurm_allocation(step) == {"num_cpus": 4, "num_gpus": 1}
    assert slurm_allocation({**step, "SLURM_CPUS_PER_TASK": "2"})["num_cpus"] == 2


@pytest.mark.slow
def test_run_on_ray_in_a_slurm_job_starts_ray_with_the_jobs_cpus_and_jax_reserves_the_planned_memory(monkeypatch):
    """The task sees the job's CPUs, and its JAX reserves the share of GPU memory the fit table plans against
    (JAX's own default, 75 %, would make a plan that fits in 90 % fail)."""

    from pipeline.execution.runner import run_on_ray

    monkeypatch.setenv("SLURM_JOB_ID", "7")
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("XLA_PYTHON_CLIENT_MEM_FRACTION", raising=False)
    cpus, fraction = (
        run_on_ray("ray:cluster_resources", address=None)["CPU"],
        run_on_ray("os:getenv", "XLA_PYTHON_CLIENT_MEM_FRACTION", address=None),
    )
    assert (cpus, fraction) == (1, "0.9")
