import json

from pipeline.artifacts import atomic_write_json, folder_bytes, provenance


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
