import json
import math

import pytest

from pipeline.artifacts import atomic_write_json, csv_text, folder_bytes, markdown_table, provenance, text_table


def test_provenance_records_commit_versions_and_host(tmp_path):
    record = provenance(started=0.0, devices=["cpu:0"])
    assert record["packages"]["levanter"] == "1.2.dev1644"
    assert record["devices"] == ["cpu:0"] and record["host"]
    atomic_write_json(tmp_path / "p.json", record)
    assert json.loads((tmp_path / "p.json").read_text())["python"].startswith("3.11")


def test_atomic_writes_get_the_permissions_of_a_plain_file(tmp_path):
    atomic_write_json(tmp_path / "summary.json", {"x": 1})
    (tmp_path / "plain.json").write_text("{}")
    assert (tmp_path / "summary.json").stat().st_mode == (tmp_path / "plain.json").stat().st_mode


def test_csv_text_keeps_none_empty_nan_readable_and_integers_whole():
    rows = [{"run": "a,b", "steps": 3, "ppl": math.nan, "passes": None}, {"run": "c", "steps": 4}]
    assert csv_text(rows, ["run", "steps", "ppl", "passes"]) == 'run,steps,ppl,passes\n"a,b",3,nan,\nc,4,,\n'


def test_csv_text_refuses_a_key_its_header_would_lose():
    with pytest.raises(ValueError, match="not in fieldnames"):
        csv_text([{"run": "a", "stray": 1}], ["run"])


def test_markdown_table_is_unpadded_with_right_aligned_columns_marked():
    table = markdown_table(["run", "GB"], [["a", "1.5"], ["bb", "10.0"]], align="lr")
    assert table == "| run | GB |\n|---|---:|\n| a | 1.5 |\n| bb | 10.0 |"
    assert markdown_table(["x"], []) == "| x |\n|---|"


def test_text_table_pads_each_column_to_its_widest_cell_and_rules_the_header_where_asked():
    table = text_table(["run", "GB", "note"], [["a", 1.5, None], ["bbbb", "10.0", "x"]], align="lrl", rule=True)
    assert table.splitlines() == ["run     GB  note", "----------------", "a      1.5  -", "bbbb  10.0  x"]
    assert text_table(["x", "y"], []) == "x  y"


def test_folder_bytes_counts_nested_files_once_and_follows_no_link(tmp_path):
    """A checkpoint's disk: every regular file below it, however deep; a link to a file or a folder elsewhere adds
    nothing (its target's bytes are that folder's)."""
    folder = tmp_path / "checkpoints" / "step-4"
    (folder / "model" / "shard").mkdir(parents=True)
    (folder / "metadata.json").write_bytes(b"x" * 10)
    (folder / "model" / "shard" / "0").write_bytes(b"x" * 100)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "big").write_bytes(b"x" * 1000)
    (folder / "link-to-file").symlink_to(elsewhere / "big")
    (folder / "model" / "link-to-folder").symlink_to(elsewhere, target_is_directory=True)
    assert folder_bytes(tmp_path / "checkpoints") == 110
