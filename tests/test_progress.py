"""A long CPU job's progress line (pipeline.execution.progress): done of total and an ETA at this process's rate."""

import logging

from pipeline.execution.progress import Progress


def test_the_eta_is_the_units_left_at_this_processs_rate_and_lines_are_spaced(caplog):
    caplog.set_level(logging.INFO)
    now = [100.0]
    progress = Progress("export", 1000, "rows", done=400, every_s=30, clock=lambda: now[0])
    assert progress.eta_s() is None
    now[0] += 10
    progress.advance(100)  # 10 s after the last line: not logged
    now[0] += 20
    progress.advance(100, note="shards 6 of 10")
    assert progress.eta_s() == 400 * 30 / 200  # the 400 rows a resumed job found done are not in its rate
    lines = [record.getMessage() for record in caplog.records]
    assert lines == [
        "export: resuming with rows 400 of 1000 done",
        "export: rows 600 of 1000 done (60.0 %), shards 6 of 10, ETA 1 min",
    ]
    progress.advance(400)
    assert caplog.records[-1].getMessage() == "export: rows 1000 of 1000 done (100.0 %), ETA 0 s"
