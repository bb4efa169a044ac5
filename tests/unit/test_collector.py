"""The job run's collector settings: applied by the first run in, restored by the last out."""

from __future__ import annotations

import gc

from emery.jobs.collector import YOUNG_THRESHOLD, quiet_collector


def test_thresholds_and_freeze_last_as_long_as_the_outermost_run() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    with quiet_collector():
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)
        assert gc.get_freeze_count() > frozen
        with quiet_collector():  # a second run in the same process
            assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)  # still inside one
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == frozen
