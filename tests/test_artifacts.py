import json

from pipeline.artifacts import atomic_write_json, provenance


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
