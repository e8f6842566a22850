"""The measured table (pipeline/planning/measured.py): which source answers a job's tokens/s (a stale or missing fit
row: tests/planning/test_jobs.py)."""

from pipeline.artifacts import csv_text
from pipeline.config import load_preset
from pipeline.planning.grid import Grid
from pipeline.planning.measured import THROUGHPUT_COLUMNS, MeasuredTable
from pipeline.preflight.report import COLUMNS, with_verdicts

GRID = Grid.load(load_preset({"preset": "tiny"}))
MEASURED_MODEL = ("gpt", "small", 4)
"""The model of the tiny preset's ``wt103-small-gpt`` and ``owt-small-gpt`` (family, size, layers)."""


def throughput_table(path):
    """``bench throughput-sizes``' table: 50 tokens/s per GPU of ``MEASURED_MODEL`` on an H100."""
    row = dict(zip(("family", "size", "num_layers"), MEASURED_MODEL, strict=True))
    row |= {"device": "h100", "hidden_dim": 64, "seq_len": 64, "params": 1, "tokens_per_s_per_gpu": 50.0}
    path.write_text(csv_text([row], THROUGHPUT_COLUMNS))
    return path


def preflight_report(path):
    """A green preflight row of ``wt103-small-gpt``'s shape on an H100: 100 tokens/s per device."""
    row = {
        "shape": "gpt-small-g1-mb0",
        "run_id": "wt103-small-gpt",
        "runs": 2,
        "device_label": "h100",
        "status": "ok",
        "error": "",
        "tokens_per_s_per_device": 100.0,
        "peak_memory_bytes": 10**9,
        "budget_bytes": 2 * 10**9,
    }
    path.write_text(csv_text(with_verdicts([row]), COLUMNS))
    return path


def test_the_preflight_wins_over_the_throughput_table_and_a_model_neither_measured_is_left_to_the_estimate(tmp_path):
    throughput = throughput_table(tmp_path / "throughput.csv")
    report = preflight_report(tmp_path / "preflight.csv")
    both = MeasuredTable(GRID, "h100", preflight_table=report, throughput_table=throughput)
    table_only = MeasuredTable(GRID, "h100", throughput_table=throughput)
    small, medium = GRID.workloads["owt-small-gpt"], GRID.workloads["owt-medium-gpt"]
    assert both.tokens_per_s(small) == (100.0, "preflight")
    assert table_only.tokens_per_s(small) == (50.0, "measured")
    assert both.tokens_per_s(medium) is None and table_only.tokens_per_s(medium) is None
