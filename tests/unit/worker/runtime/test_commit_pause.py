"""The pause of periodic commits while a member rejoins (``Worker._periodic_commit``).

The barrier at rejoin (docs/architecture.md) holds periodic commits until the next assignment;
a rejoin that outlasts half the transaction timeout gets one commit per pause, which keeps
the open transaction alive, and not the periodic commits back, one of which would be in
flight when the generation moves. The broker's side is
``tests/integration/test_eos_rebalance_commits.py``; here the clock is the test's
(``time.monotonic``, patched for the test's length).
"""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest

from baton.worker.runtime.worker import Worker

pytestmark = pytest.mark.unit

INTERVAL = 0.1  # exactly-once's commit interval
LIMIT = 5.0  # half of a 10 s transaction timeout


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _worker(clock: _Clock, paused_for: float | None) -> tuple[Worker, list[float]]:
    """A worker whose processing thread has caught up: only the commit schedule runs."""
    commits: list[float] = []
    w = Worker.__new__(Worker)
    w._commit_pause_limit = LIMIT
    w._commits_paused_until = None if paused_for is None else clock.now + paused_for
    w.guarantee = SimpleNamespace(unsettled=False)  # type: ignore[assignment]
    w._commit = lambda pipelined=False: commits.append(clock.now)  # type: ignore[method-assign]
    return w, commits


def _run(w: Worker, clock: _Clock, seconds: float) -> None:
    """The loop's turns, every 10 ms, cutting the periodic commit whenever it is due."""
    due = clock.now
    end = clock.now + seconds
    while clock.now < end:
        if clock.now >= due:
            due = w._periodic_commit(due, INTERVAL)
        clock.now += 0.01


def test_no_pause_commits_every_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = _Clock()
    monkeypatch.setattr(time, "monotonic", clock)  # the worker's clock
    w, commits = _worker(clock, paused_for=None)
    _run(w, clock, 2.0)
    assert 18 <= len(commits) <= 21


def test_a_long_rejoin_gets_one_commit_per_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """35 s without an assignment (a Pod slow to leave held a scale-in that long): a commit at
    each pause's end, 5 s apart, never the 100 ms cadence back."""
    clock = _Clock()
    monkeypatch.setattr(time, "monotonic", clock)  # the worker's clock
    start = clock.now
    w, commits = _worker(clock, paused_for=LIMIT)
    _run(w, clock, 35.0)
    assert len(commits) == 6, commits
    gaps = [b - a for a, b in zip([start, *commits], commits, strict=False)]
    assert all(LIMIT - 0.02 <= g <= LIMIT + 0.02 for g in gaps), gaps


def test_the_assignment_ends_the_pause(monkeypatch: pytest.MonkeyPatch) -> None:
    """What ``_roles_changed`` does on the next assignment: the cadence is back at once."""
    clock = _Clock()
    monkeypatch.setattr(time, "monotonic", clock)  # the worker's clock
    w, commits = _worker(clock, paused_for=LIMIT)
    _run(w, clock, 7.0)
    assert len(commits) == 1
    w._commits_paused_until = None
    _run(w, clock, 1.0)
    assert len(commits) >= 9
