"""Job kinds (pipeline/planning/placement.py ``JobKind``): the site file's ``slurm_extra`` keys, each with what its
jobs differ by stated once."""

import dataclasses

import yaml

from pipeline.config.site import EXAMPLE, SITE_SCHEMA, Site, load_site
from pipeline.planning.placement import JobKind, placement, resource_names

SITE = load_site(EXAMPLE)


def test_the_job_kinds_are_the_site_files_slurm_extra_keys():
    schema = yaml.safe_load(SITE_SCHEMA.read_text())["properties"]["site"]["properties"]["slurm_extra"]
    assert sorted({kind.extra_key for kind in JobKind}) == sorted(schema["required"]) == ["cpu", "gpu", "training"]
    assert [kind for kind in JobKind if kind.extra_key != kind.value] == [JobKind.DATA]


def test_each_job_kind_states_whether_it_resumes_runs_on_a_gpu_and_which_site_keys_name_its_partition():
    assert {kind: (kind.resumable, kind.on_gpu, kind.partition_keys) for kind in JobKind} == {
        JobKind.TRAINING: (True, True, ("gpu_partition", "max_runtime_min")),
        JobKind.GPU: (False, True, ("gpu_partition", "max_runtime_min")),
        JobKind.CPU: (False, False, ("cpu_partition", "cpu_max_runtime_min")),
        JobKind.DATA: (True, False, ("cpu_partition", "cpu_max_runtime_min")),
    }
    fields = {field.name for field in dataclasses.fields(Site)}
    assert all(set(kind.partition_keys) <= fields for kind in JobKind)


def test_each_job_kinds_placement_and_resource_names_follow_its_properties():
    """Resumable jobs (training, data) are warned before their walltime and have chunks, training jobs alone a
    micro-batch; CPU and data jobs run on the CPU partition, without the site's GPU model; each kind gets the site's
    sbatch extras of its own key."""
    site = dataclasses.replace(
        SITE, gpu_model="h100", slurm_extra={"training": "--exclusive", "gpu": None, "cpu": "--nice=10"}
    )
    placements = {kind: placement(site, kind) for kind in JobKind}
    assert {kind: (p.partition, p.sbatch_flags, p.signal_lead_s) for kind, p in placements.items()} == {
        JobKind.TRAINING: ("gpu", ("--exclusive",), 600),
        JobKind.GPU: ("gpu", (), 0),
        JobKind.CPU: ("cpu", ("--nice=10",), 0),
        JobKind.DATA: ("cpu", ("--nice=10",), 600),
    }
    common = ["slurm_partition", "nodes", "gpu", "cpus_per_task", "mem_mb", "runtime", "needed_min"]
    assert {kind: resource_names(site, kind) for kind in JobKind} == {
        JobKind.TRAINING: [*common, "slurm_extra", "gpu_model", "micro_batch", "chunks"],
        JobKind.GPU: [*common, "gpu_model"],
        JobKind.CPU: [*common, "slurm_extra"],
        JobKind.DATA: [*common, "slurm_extra", "chunks"],
    }
    assert {kind: resource_names(None, kind) for kind in JobKind} == {
        JobKind.TRAINING: ["gpu", "micro_batch"],
        JobKind.GPU: ["gpu"],
        JobKind.CPU: ["gpu"],
        JobKind.DATA: ["gpu"],
    }
