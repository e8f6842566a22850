"""The Snakemake report of the report rules, rendered in headless Chromium, lists and shows each figure."""

from pathlib import Path

import pytest
from chromium import assert_report_shows_figures, chromium_binary
from cli_testkit import snakemake_run
from contract_files import populate_preset

from pipeline.config import load_preset, pretrain_runs

pytestmark = pytest.mark.slow
REPORT_RULES = ["perplexity_table", "pretrain_runs_csv", "figure_curves", "figure_clustering", "scorecard"]
TARGETS = [
    "results/tiny/tables/perplexity.html",
    "results/tiny/figures/curves/owt-small.png",
    "results/tiny/figures/clustering_trajectories.png",
    "results/tiny/figures/clustering_stats.png",
    "results/tiny/scorecard.html",
]


def snakemake(workdir: Path, *args: str) -> None:
    """Snakemake on ``TARGETS`` with only the report's rules allowed (the synthetic inputs stand for the rest)."""
    result = snakemake_run(workdir, "--cores", "2", *args, *TARGETS, "--allowed-rules", *REPORT_RULES)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def test_report_html_shows_every_figure_in_headless_chromium(tmp_path):
    assert chromium_binary(), "chromium is not installed (apt-get install -y --no-install-recommends chromium)"
    config = load_preset({"preset": "tiny"})
    populate_preset(tmp_path / "results" / "tiny", config, pretrain_runs(config))
    snakemake(tmp_path)
    snakemake(tmp_path, "--report", str(tmp_path / "report.html"))
    found = assert_report_shows_figures(tmp_path / "report.html", TARGETS)
    figure = found["results/tiny/figures/curves/owt-small.png"]
    assert figure["category"] == "Figures" and figure["subcategory"] == "Pretraining"
    assert "validation perplexity" in figure["caption"] and figure["width"] > 300
    assert found["results/tiny/scorecard.html"]["category"] == "Scorecard"
