"""Every figure function on synthetic contract files writes a valid PNG and PDF (one process: matplotlib once)."""

import pytest
from contract_files import (
    figure_files,
    write_clustering,
    write_downstream,
    write_finetunes,
    write_frontier,
    write_lyapunov,
    write_memory_record,
    write_pretrain_run,
    write_spectra,
)

from pipeline.report import figures
from pipeline.report.tidy_inputs import load_memory_probes

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def assert_figure(stem):
    png, pdf = figure_files(stem)
    assert png.read_bytes().startswith(PNG_MAGIC) and png.stat().st_size > 5000, png
    assert pdf.read_bytes().startswith(b"%PDF-") and b"%%EOF" in pdf.read_bytes()[-32:], pdf


@pytest.fixture
def large_runs(tmp_path):
    runs = [
        write_pretrain_run(tmp_path, "owt-large-gpt", ppl=560.0, beta2=0.95),
        write_pretrain_run(tmp_path, "owt-large-diffeq", ppl=550.0, beta2=0.95, time_embed_dim=16),
        *(
            write_pretrain_run(tmp_path, f"owt-large-beta2_0.999-{family}", ppl=ppl, ablation="beta2_0.999")
            for family, ppl in (("gpt", 555.0), ("diffeq", 565.0))
        ),
    ]
    dims = [
        write_pretrain_run(
            tmp_path,
            f"owt-large-time_embed_dim_{d}-diffeq",
            ppl=570.0 - d,
            ablation=f"time_embed_dim_{d}",
            time_embed_dim=d,
            tokens_per_s=4000.0 - 10 * d,
        )
        for d in (4, 8)
    ]
    return runs, dims


def test_pretraining_and_ablation_figures(tmp_path, large_runs):
    runs, dims = large_runs
    fig = tmp_path / "fig"
    figures.curves_figure(runs[:2], figure_files(fig / "curves"))
    figures.beta2_figure(runs, figure_files(fig / "beta2"))
    figures.time_embed_dim_figures(runs[:2] + dims, figure_files(fig / "ted_ppl"), figure_files(fig / "ted_tp"))
    design = "time_mlp_design_shared"
    shared = write_pretrain_run(
        tmp_path, f"owt-medium-{design}-diffeq", ppl=600.0, ablation=design, shared_time_mlp=True
    )
    medium = write_pretrain_run(tmp_path, "owt-medium-diffeq", ppl=590.0)
    figures.time_mlp_design_figure([medium, shared], figure_files(fig / "design"))
    for name in ("curves", "beta2", "ted_ppl", "ted_tp", "design"):
        assert_figure(fig / name)


def test_finetune_downstream_and_analysis_figures(tmp_path):
    directions = [("wt103", "owt"), ("owt", "wt103")]
    summaries = write_finetunes(tmp_path, directions, ["lora", "full"], diffeq=6, steps_grid=[3, 6], gpt=8)
    fig = tmp_path / "fig"
    figures.finetune_figure(summaries, figure_files(fig / "finetune"))
    accuracy = {(task, k): 0.4 for task in ("tiny_choice", "tiny_lambada") for k in (0, 5)}
    downstream = [write_downstream(tmp_path, f"owt-large-{f}", family=f, accuracy=accuracy) for f in ("gpt", "diffeq")]
    figures.downstream_figures(downstream, {k: figure_files(fig / f"gpt-large-{k}shot") for k in (0, 5)})
    with pytest.raises(ValueError, match="key 'shots' has no rows with 1 shots"):
        figures.downstream_figures(downstream, {1: figure_files(fig / "gpt-large-1shot")})
    spectra = write_spectra(tmp_path, "owt-medium-diffeq", family="diffeq", growth=2.0)
    figures.spectra_figure(spectra, figure_files(fig / "spectra"))
    figures.lyapunov_figure(write_lyapunov(tmp_path, "owt-medium-diffeq"), figure_files(fig / "lyapunov"))
    figures.clustering_figures(*write_clustering(tmp_path), figure_files(fig / "traj"), figure_files(fig / "stats"))
    frontier = [
        write_frontier(tmp_path, "owt-medium-diffeq"),
        write_frontier(tmp_path, "wt103-medium-diffeq", dataset="wt103"),
    ]
    figures.frontier_figure(frontier, figure_files(fig / "frontier"))
    for name in ("finetune", "gpt-large-0shot", "gpt-large-5shot", "spectra", "lyapunov", "traj", "stats", "frontier"):
        assert_figure(fig / name)


def test_memory_figure_plots_the_allocator_peak_only_when_every_probe_measured_one(tmp_path):
    def probes(folder, device_peak_for):
        return [
            write_memory_record(
                folder,
                f"owt-medium-memory_d{d}-diffeq",
                family="diffeq",
                time_embed_dim=d,
                parameters=100_000 * d,
                peak_bytes=2**30 + d * 2**20,
                device_peak=d in device_peak_for,
            )
            for d in (4, 12, 24)
        ]

    baseline = write_memory_record(
        tmp_path / "gpu",
        "owt-medium-memory-gpt",
        family="gpt",
        time_embed_dim=None,
        parameters=300_000,
        peak_bytes=2**30,
        device_peak=True,
    )
    measured = [baseline, *probes(tmp_path / "gpu", device_peak_for=(4, 12, 24))]
    table, source = load_memory_probes(measured)
    assert source == "measured allocator peak"
    assert table["peak_bytes"].tolist() == [2**30, *[2**30 + d * 2**20 for d in (4, 12, 24)]]
    table, source = load_memory_probes(probes(tmp_path / "mixed", device_peak_for=(4,)))
    assert source == "XLA plan of the compiled step"
    assert table["peak_bytes"].tolist() == [2**30 + 4 * 2**20 - 2**20, 2**30 + 12 * 2**20, 2**30 + 24 * 2**20]
    figures.memory_figure(measured, figure_files(tmp_path / "fig" / "memory"))
    assert_figure(tmp_path / "fig" / "memory")


def test_a_spectra_file_without_its_columns_fails_naming_the_file(tmp_path):
    path = tmp_path / "spectra.csv"
    path.write_text("run_id,matrix\nx,QK\n")
    with pytest.raises(ValueError, match=r"spectra.csv: key 'family' is missing"):
        figures.spectra_figure(path, tmp_path / "out")
