import json

from pipeline.artifacts import MetricsLog, atomic_write_json, provenance


def test_metrics_log_drops_records_past_the_resumed_step(tmp_path):
    path = tmp_path / "metrics.jsonl"
    log = MetricsLog(path)
    log.write({"step": 0, "eval_loss": 2.0})
    for step in range(6):
        log.write({"step": step, "loss": 1.0 / (step + 1)})
        if step % 2:
            log.write({"step": step + 1, "eval_loss": 1.0 / (step + 1)})
    log.close()
    resumed = MetricsLog(path, resume_step=4)
    resumed.write({"step": 4, "loss": 0.5})
    resumed.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["step"] for r in records if "loss" in r] == [0, 1, 2, 3, 4]
    assert [r["step"] for r in records if "eval_loss" in r] == [0, 2, 4]


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
