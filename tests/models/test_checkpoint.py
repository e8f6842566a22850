"""A run's final checkpoint is Levanter's newest complete one, found on any fsspec filesystem (gs://, s3://, ...)."""

import json

import fsspec
import pytest

from pipeline.models.checkpoint import final_checkpoint


def test_final_checkpoint_is_the_newest_complete_one_on_a_non_local_filesystem():
    memory = fsspec.filesystem("memory")
    for step, saved in ((3, "2026-11-24T01:00:00"), (7, "2026-11-24T01:05:00")):
        memory.pipe(
            f"/finished/checkpoints/step-{step}/metadata.json", json.dumps({"step": step, "timestamp": saved}).encode()
        )
    memory.pipe("/finished/checkpoints/step-9/model/.zarray", b"{}")  # still being written: no metadata.json
    assert final_checkpoint("memory://finished") == "memory:///finished/checkpoints/step-7"
    with pytest.raises(FileNotFoundError) as error:
        final_checkpoint("memory://untrained")
    assert str(error.value) == (
        "memory://untrained/checkpoints: no complete checkpoint (step-N/metadata.json); train the run first."
    )
