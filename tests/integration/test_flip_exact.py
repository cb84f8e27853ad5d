"""Blue-green flips under continuous input lose and duplicate nothing (issue 6).

Both colors run the click counter with the write cache off, so every input record yields
exactly one output record and the output of one uninterrupted run is known: for each user,
the counts 1, 2, ..., n in order. The test compares the read_committed sink topic with that,
record by record, after flips back and forth while input keeps arriving.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from batondev.paths import FIXTURES

from baton.control.coordinator import FlipResult, flip
from baton.control.messages import Color
from baton.testing import SteadyInput, wait_for
from tests.support.flips import assert_exact, latest_counts, running_colors

pytestmark = pytest.mark.integration


@pytest.fixture
def app(new_topic: Callable[..., str], unique_name: str) -> Iterator[tuple[str, str, str]]:
    yield unique_name, new_topic(partitions=4), new_topic(partitions=4)


def test_five_flips_under_steady_input_are_exact(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    base, clicks, counts = app
    with running_colors(tmp_path, kafka_bootstrap, base, clicks, counts, per_color=1):
        results: list[FlipResult] = []
        with SteadyInput(kafka_bootstrap, clicks, rate=400) as steady:
            time.sleep(3)
            for i in range(5):
                to: Color = "green" if i % 2 == 0 else "blue"
                result = flip(kafka_bootstrap, base, to, deadline_s=15)
                assert result.committed, result.reason
                results.append(result)
                time.sleep(2)
        sent = steady.sent
        expected_total = sum(sent.values())

        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 120)
        assert assert_exact(kafka_bootstrap, counts, sent) == expected_total
        assert [r.to for r in results] == ["green", "blue", "green", "blue", "green"]
        assert all(len(r.cut) == 4 for r in results)


def test_flip_aborts_when_a_color_is_down_and_old_active_keeps_emitting(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    base, clicks, counts = app
    with running_colors(tmp_path, kafka_bootstrap, base, clicks, counts, per_color=1) as workers:
        workers["green"][0].stop()
        result = flip(kafka_bootstrap, base, "green", deadline_s=5)
        assert not result.committed
        assert "green" in result.reason and "no position before the deadline" in result.reason
        # blue is still active: new input is counted and emitted
        with SteadyInput(kafka_bootstrap, clicks, rate=200) as steady:
            time.sleep(2)
        sent = steady.sent
        wait_for(
            "counts after the aborted flip", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 90
        )
        assert_exact(kafka_bootstrap, counts, sent)


def test_new_active_ahead_holds_until_old_active_drained(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    """Blue (active) is slower than the input, so green is ahead at the flip: green must wait for
    blue to emit up to the cut before it emits itself, or per-key order would break."""
    base, clicks, counts = app
    slow = str(FIXTURES / "slow_click_counter.py")
    with running_colors(
        tmp_path,
        kafka_bootstrap,
        base,
        clicks,
        counts,
        per_color=1,
        topology=slow,
        color_env={"blue": {"CLICK_DELAY_MS": "10"}},
    ) as workers:
        blue, green = workers["blue"][0], workers["green"][0]
        with SteadyInput(kafka_bootstrap, clicks, rate=300) as steady:
            # blue handles <100 records/s of 300/s, so after 4 s it is ~800 records behind green.
            # Its batches shrink to ~0.1 s of work (baton/worker/runtime/batching.py), so it sees the
            # prepare at once and reports a position well behind green's: green holds at the cut
            # while blue drains the backlog, about 8 s.
            time.sleep(4)
            result = flip(kafka_bootstrap, base, "green", deadline_s=20)
            time.sleep(1)
        assert result.committed, result.reason
        assert result.pending, "green was not ahead of blue on any partition: the test did not test the hold"
        sent = steady.sent
        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 180)
        assert_exact(kafka_bootstrap, counts, sent)
        assert any(
            line.get("msg") == "holding at the cut until the old active drains" for line in green.logs()
        )
        assert any(line.get("msg") == "old active drained, emitting" for line in green.logs())
        drained = [line for line in blue.logs() if line.get("msg") == "drained below the cut"]
        assert len(drained) == len(result.pending)


def test_worker_killed_during_flip_keeps_output_exact(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    base, clicks, counts = app
    with running_colors(tmp_path, kafka_bootstrap, base, clicks, counts, per_color=2) as workers:
        outcomes: list[FlipResult] = []
        with SteadyInput(kafka_bootstrap, clicks, rate=300) as steady:
            time.sleep(2)
            for victim, to in ((workers["blue"][1], "green"), (workers["green"][0], "blue")):
                flipper = threading.Thread(
                    target=lambda to=to: outcomes.append(flip(kafka_bootstrap, base, to, deadline_s=8))
                )
                flipper.start()
                time.sleep(0.05)
                victim.kill()  # SIGKILL while the flip is being prepared
                flipper.join(120)
                victim.start()  # a restart, as the StatefulSet controller would do
                victim.wait_ready(120)
                time.sleep(2)
        sent = steady.sent
        assert len(outcomes) == 2
        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 180)
        assert_exact(kafka_bootstrap, counts, sent)
