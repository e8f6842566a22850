"""Each tidy file's columns are defined once, beside its writer, and the report reads that definition."""

import ast
from pathlib import Path

import pipeline.evaluate as evaluate
from pipeline.analysis import tidy as analysis_tidy
from pipeline.report import figures, tables, tidy_inputs

PACKAGE = Path(__file__).resolve().parent.parent / "pipeline"


def module_level_column_lists() -> dict[str, list[str]]:
    """Every module-level ``*_COLUMNS = [literal strings]`` (or tuple) of the package, as "module:NAME" → columns."""
    lists = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.parse(path.read_text()).body:
            if (
                isinstance(node, ast.Assign)
                and isinstance(node.value, ast.List | ast.Tuple)
                and all(isinstance(item, ast.Constant) for item in node.value.elts)
            ):
                for target in node.targets:
                    if isinstance(target, ast.Name) and target.id.endswith("COLUMNS"):
                        lists[f"{path.relative_to(PACKAGE)}:{target.id}"] = [item.value for item in node.value.elts]
    return lists


def test_no_column_list_is_spelled_out_twice():
    lists = module_level_column_lists()
    copies = {
        name: [other for other, columns in lists.items() if other != name and columns == lists[name]] for name in lists
    }
    assert {name: others for name, others in copies.items() if others} == {}


def test_the_report_reads_the_writers_column_lists():
    assert figures.SPECTRA_COLUMNS is analysis_tidy.SPECTRA_COLUMNS
    assert figures.LYAPUNOV_COLUMNS is analysis_tidy.LYAPUNOV_COLUMNS
    assert figures.FRONTIER_COLUMNS is analysis_tidy.FRONTIER_COLUMNS
    assert tables.PARAM_COUNT_COLUMNS is analysis_tidy.PARAM_COUNT_COLUMNS
    assert tidy_inputs.DOWNSTREAM_COLUMNS is evaluate.DOWNSTREAM_COLUMNS
