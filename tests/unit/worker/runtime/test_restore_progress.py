"""Restore progress lines: at most one per interval per store, with rate and expected end."""

from __future__ import annotations

import pytest

from baton.worker.runtime.restore_progress import RestoreProgress

pytestmark = pytest.mark.unit


def test_a_line_every_interval_with_rate_and_expected_end() -> None:
    now = [100.0]
    progress = RestoreProgress(interval=10, clock=lambda: now[0])
    assert progress.update("0_1", "counts", 0, 1000, 9000) is None  # the first batch starts the clock
    now[0] = 105.0
    assert progress.update("0_1", "counts", 0, 1000, 8000) is None  # not yet due
    now[0] = 110.0
    line = progress.update("0_1", "counts", 0, 2000, 6000)
    assert line == {
        "task": "0_1",
        "store": "counts",
        "restored": 4000,
        "remaining": 6000,
        "records_per_second": 400,
        "expected_seconds": 15.0,
    }
    assert progress.update("0_1", "counts", 0, 10, 5990) is None  # the next one in 10 s
    # another restore of the store (another starting offset) counts from nothing
    now[0] = 130.0
    assert progress.update("0_1", "counts", 7000, 500, 100) is None
    now[0] = 140.0
    again = progress.update("0_1", "counts", 7000, 500, 0)
    assert again is not None and again["restored"] == 1000 and again["expected_seconds"] == 0.0
