"""A corpus export stopped by SIGTERM (a walltime warning) resumes after its finished shards and ends with exactly the
data of an uninterrupted export (pipeline.data.shards; docs/runs.md#data-jobs-resume)."""

import json
import logging
import os
import signal
import subprocess
import sys
import time

from pipeline.cli import main
from pipeline.config import REPO_ROOT
from pipeline.data.corpora import export_tiny_corpus
from pipeline.data.files import staging_directory
from pipeline.data.shards import LEDGER, read_ledger, shard_name
from pipeline.execution.errors import STOPPED_AT

DOCS_PER_SHARD = 3
"""Small shards, so the export is stopped between thousands of them (fortunes: 14304 documents)."""


def _export_command(out):
    source = json.dumps({"kind": "tiny", "corpus": "fortunes"})
    return ["corpus", "--source", source, "--out", str(out), "--docs-per-shard", str(DOCS_PER_SHARD)]


def _stop_after_two_shards(out):
    """Start the export in its own process, SIGTERM it once its ledger lists two finished shards; its stderr."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    job = subprocess.Popen(
        [sys.executable, "-m", "pipeline", *_export_command(out)], stderr=subprocess.PIPE, text=True, env=env
    )
    ledger = staging_directory(out) / LEDGER
    deadline = time.monotonic() + 120
    while not (ledger.is_file() and len(ledger.read_text().splitlines()) >= 3) and time.monotonic() < deadline:
        time.sleep(0.01)
    job.send_signal(signal.SIGTERM)
    _, stderr = job.communicate(timeout=120)
    assert job.returncode == 1, stderr
    return stderr


def test_a_stopped_export_resumes_after_its_finished_shards_and_rewrites_a_torn_or_unlisted_one(tmp_path, caplog):
    out = tmp_path / "fortunes"
    last_line = _stop_after_two_shards(out).strip().splitlines()[-1]
    stop = STOPPED_AT.search(last_line)
    assert stop and stop[1] == "SIGTERM" and last_line.endswith("rerun the job to resume after them."), last_line
    assert not out.exists()
    staging = staging_directory(out)
    _, finished = read_ledger(staging)
    assert 2 <= len(finished) == int(stop[2]) < int(stop[3])
    kept = staging / finished[0]["file"]
    kept_stat = kept.stat()
    torn = staging / finished[-1]["file"]
    torn.write_bytes(torn.read_bytes()[:-8])
    (staging / shard_name("train", len(finished))).write_bytes(b"not a shard of this export")

    caplog.set_level(logging.INFO)
    assert main(_export_command(out)) == 0
    assert f"shard {torn.name} is missing or torn (another sha256); writing it again" in caplog.text

    reference = export_tiny_corpus("fortunes", tmp_path / "reference", docs_per_shard=DOCS_PER_SHARD)
    manifest = json.loads((out / "manifest.json").read_text())
    for split in ("train", "validation"):
        assert manifest[split]["shards"] == reference[split]["shards"]
        assert [manifest[split][key] for key in ("documents", "characters")] == [
            reference[split][key] for key in ("documents", "characters")
        ]
    names = sorted(path.name for path in out.iterdir())
    assert names == sorted(path.name for path in (tmp_path / "reference").iterdir())
    for name in set(names) - {"manifest.json"}:  # the manifest names each file by its absolute path
        assert (out / name).read_bytes() == (tmp_path / "reference" / name).read_bytes(), name
    resumed_from = out / finished[0]["file"]
    assert (resumed_from.stat().st_ino, resumed_from.stat().st_mtime_ns) == (kept_stat.st_ino, kept_stat.st_mtime_ns)
    assert not staging.exists()
