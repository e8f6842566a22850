"""lm-eval's job (``JobSizing.gpu_analysis`` of ``downstream``): one GPU for the base minutes of
``GPU_ANALYSIS_MINUTES`` plus its requests' estimated GPU-hours, unlike the GPU analyses."""

import math

from pipeline.config import load_preset
from pipeline.config.site import EXAMPLE, load_site
from pipeline.planning.grid import Grid
from pipeline.planning.jobs import GPU_ANALYSIS_MINUTES, JobSizing
from pipeline.planning.placement import JobKind, JobRequest, placement
from pipeline.planning.preflight_jobs import StageJob

SITE = load_site(EXAMPLE)
GRID = Grid.load(load_preset({"preset": "paper"}))
JOBS = JobSizing(GRID, SITE)


def test_downstream_gets_one_gpu_for_its_base_minutes_plus_its_lm_eval_gpu_hours_at_the_example_site():
    runs = [job.model_id for job in GRID.downstream.values()]
    assert len(runs) == 4
    for run_id in runs:
        hours = JOBS.gpu_hours(f"downstream-{run_id}")
        minutes = GPU_ANALYSIS_MINUTES["downstream"] + math.ceil(hours * SITE.safety_factor * 60)
        assert minutes > GPU_ANALYSIS_MINUTES["downstream"]
        assert JOBS.gpu_analysis("downstream", run_id) == JobRequest(
            gpus=1,
            placement=placement(SITE, JobKind.GPU),
            gpu_model=SITE.gpu_model,
            cpus=SITE.cpus_per_gpu,
            mem_mb=SITE.mem_mb_per_gpu,
            minutes=minutes,
            needed_minutes=minutes,
        ), run_id
    assert JobSizing(GRID, None).gpu_analysis("downstream", runs[0]) == JobRequest()


def test_the_preflights_lm_eval_stage_job_is_sized_as_downstream_and_an_analysis_stage_job_as_its_analysis():
    lm_eval = StageJob("downstream", GRID.downstream["downstream-owt-large-gpt"], 1)
    assert lm_eval.resources(JOBS) == JOBS.gpu_analysis("downstream", "owt-large-gpt")
    spectra = StageJob("spectra", GRID.pretraining["owt-large-gpt"], 1)
    assert spectra.resources(JOBS) == JOBS.gpu_analysis("spectra", "owt-large-gpt")
    assert spectra.resources(JOBS).minutes == GPU_ANALYSIS_MINUTES["spectra"]
