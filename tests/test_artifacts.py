import json

import pytest

from pipeline.artifacts import MetricsLog, atomic_directory, atomic_write_json, provenance


def test_atomic_directory_leaves_nothing_when_the_job_fails(tmp_path):
    target = tmp_path / "cache"
    with pytest.raises(RuntimeError), atomic_directory(target) as staging:
        (staging / "half.bin").write_text("partial")
        raise RuntimeError("killed")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_atomic_directory_replaces_an_old_output_in_one_rename(tmp_path):
    target = tmp_path / "cache"
    target.mkdir()
    (target / "old").write_text("old")
    with atomic_directory(target) as staging:
        (staging / "new").write_text("new")
        assert (target / "old").exists()
    assert [p.name for p in target.iterdir()] == ["new"]


def test_metrics_log_drops_records_past_the_resumed_step(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    for step in range(6):
        log.write({"step": step, "loss": 1.0 / (step + 1)})
    log.close()
    resumed = MetricsLog(path, resume_step=4)
    resumed.write({"step": 4, "loss": 0.5})
    resumed.close()
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [0, 1, 2, 3, 4]


def test_provenance_records_commit_versions_and_host(tmp_path):
    record = provenance(started=0.0, devices=["cpu:0"])
    assert record["packages"]["levanter"] == "1.2.dev1644"
    assert record["devices"] == ["cpu:0"] and record["host"]
    atomic_write_json(tmp_path / "p.json", record)
    assert json.loads((tmp_path / "p.json").read_text())["python"].startswith("3.11")
