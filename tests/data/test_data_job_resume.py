"""Data jobs stopped by SIGTERM (as by a walltime warning) resume after what they finished and end with exactly the data
of an uninterrupted job: the corpus export (pipeline.data.shards) and the token cache (pipeline.data.cache);
docs/runs.md#data-jobs-resume."""

import json
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from cache_testkit import spoil_finished_shards, token_arrays
from levanter.store.cache import CacheLedger

from pipeline.cli import main
from pipeline.config import REPO_ROOT
from pipeline.data.corpora import export_tiny_corpus
from pipeline.data.files import staging_directory
from pipeline.data.shards import LEDGER, finished_shard_count, read_ledger, shard_name, whole_ledger
from pipeline.execution.errors import STOPPED_AT
from pipeline.planning.status import data_job_lines
from pipeline.train.attempts import data_attempt_file

DOCS_PER_SHARD = 3
"""Small shards, so the export is stopped between thousands of them (fortunes: 14304 documents)."""


def _export_command(out):
    source = json.dumps({"kind": "tiny", "corpus": "fortunes", "docs_per_shard": DOCS_PER_SHARD})
    return ["corpus", "--source", source, "--out", str(out)]


def _stop_when(command, ready):
    """Run ``python -m pipeline <command>`` in its own process, SIGTERM it once ``ready()``; the last line of its
    stderr, which must be a stop sentence."""
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    job = subprocess.Popen([sys.executable, "-m", "pipeline", *command], stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.monotonic() + 300
    while not ready() and job.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    job.send_signal(signal.SIGTERM)
    _, stderr = job.communicate(timeout=300)
    assert job.returncode == 1, stderr
    last_line = stderr.strip().splitlines()[-1]
    assert STOPPED_AT.search(last_line) and last_line.endswith("rerun the job to resume."), last_line
    return last_line


def _ledger_lines(path, count):
    """Whether the text file ``path`` has ``count`` lines yet."""
    return path.is_file() and len(path.read_text().splitlines()) >= count


def test_a_stopped_export_resumes_after_its_finished_shards_and_rewrites_a_torn_or_unlisted_one(tmp_path, caplog):
    out = tmp_path / "data" / "corpora" / "owt"
    staging = staging_directory(out)
    stop = STOPPED_AT.search(_stop_when(_export_command(out), lambda: _ledger_lines(staging / LEDGER, 3)))
    assert stop[1] == "SIGTERM" and not out.exists()
    _, finished = read_ledger(staging)
    assert 2 <= len(finished) == int(stop[2]) < int(stop[3])
    stopped = {"attempt": 1, "from_step": 0, "outcome": "stopped", "step": len(finished)}
    assert json.loads(data_attempt_file(out).read_text()) == stopped
    assert data_job_lines(tmp_path) == [f"data corpora/owt: {len(finished)} of {stop[3]} shards, stopped"]
    kept = staging / finished[0]["file"]
    kept_stat = kept.stat()
    torn = staging / finished[-1]["file"]
    torn.write_bytes(torn.read_bytes()[:-8])
    (staging / shard_name("train", len(finished))).write_bytes(b"not a shard of this export")

    caplog.set_level(logging.INFO)
    assert main([*_export_command(out), "--attempt", "2"]) == 0  # a retry after a stop runs, from its shards
    assert json.loads(data_attempt_file(out).read_text()) == {
        "attempt": 2,
        "from_step": len(finished),
        "outcome": "done",
    }
    assert f"shard {torn.name} is missing or torn (another sha256); writing it again" in caplog.text
    assert "Tiny corpus 'fortunes': rows 14304 of 14304 done (100.0 %), shards 4768 of 4768, ETA 0 s" in caplog.text

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


def _cache_command(corpus, tokenizer, out, *builder):
    return ["cache", "--corpus", str(corpus), "--tokenizer", str(tokenizer), "--out", str(out), "--builder", *builder]


@pytest.mark.slow
def test_a_stopped_ray_cache_build_resumes_from_levanters_ledger_without_tokenizing_finished_shards_again(
    tmp_path, tokenizer_dir
):
    corpus = tmp_path / "corpus"
    export_tiny_corpus("fortunes", corpus, docs_per_shard=300)
    reference = tmp_path / "reference"
    assert main(_cache_command(corpus, tokenizer_dir, reference, "serial")) == 0
    out = tmp_path / "cache"
    command = _cache_command(corpus, tokenizer_dir, out, "ray", "--ray-num-cpus", "2")
    staging = staging_directory(staging_directory(out) / "train")
    stop = STOPPED_AT.search(_stop_when(command, lambda: finished_shard_count(staging) >= 2))
    finished = whole_ledger(staging, restore=True)["finished_shards"]  # a torn one put back from its backup
    assert int(stop[2]) >= 2 and 1 <= len(finished) < int(stop[3]) == 46 and not out.exists()
    spoil_finished_shards(corpus, finished)  # tokenizing a finished shard again would fail

    assert main(command) == 0  # the rerun in this process: only the stop needs a process of its own
    assert sorted(path.name for path in out.iterdir()) == sorted(path.name for path in reference.iterdir())
    for split in ("train", "validation"):
        tokens, offsets = token_arrays(out, split)
        reference_tokens, reference_offsets = token_arrays(reference, split)
        assert np.array_equal(tokens, reference_tokens) and np.array_equal(offsets, reference_offsets), split
        assert CacheLedger.load(str(out / split)).metadata == CacheLedger.load(str(reference / split)).metadata
