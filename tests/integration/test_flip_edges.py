"""Flips at the protocol's edges, on the real broker (issue 16): a Rebuild after flips, quick
re-flips while the old active still drains, and partitions moving during a flip.

Every test compares the sink record by record with one uninterrupted run (each user's
counts 1, 2, ..., n, strictly increasing): a duplicate, a loss or a reordering fails it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from batondev.paths import FIXTURES, REPO

from baton.control.channel import ControlReader, ControlWriter, control_topic
from baton.control.coordinator import FlipResult, flip
from baton.control.messages import Abort, Prepare
from baton.testing import SteadyInput, WorkerProcess, wait_for
from tests.support.flips import TOPOLOGY, assert_exact, latest_counts, running_colors

pytestmark = pytest.mark.integration


@pytest.fixture
def app(new_topic: Callable[..., str], unique_name: str) -> Iterator[tuple[str, str, str]]:
    yield unique_name, new_topic(partitions=4), new_topic(partitions=4)


def test_rebuild_of_the_idle_color_after_flips_emits_no_history_again(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    """Hole 1: the rebuilt idle color (new application id, empty state, input from offset 0)
    replays all history silently, catches up, and can then be flipped to, exactly."""
    base, clicks, counts = app
    with running_colors(tmp_path, kafka_bootstrap, base, clicks, counts, per_color=1) as workers:
        with SteadyInput(kafka_bootstrap, clicks, rate=300) as steady:
            time.sleep(2)
            for to in ("green", "blue", "green"):
                assert flip(kafka_bootstrap, base, to, deadline_s=15).committed
                time.sleep(1.5)
            workers["blue"][0].stop()  # blue is idle: rebuild it as stateMigration: Rebuild does
            rebuilt = WorkerProcess(
                TOPOLOGY,
                bootstrap=kafka_bootstrap,
                application_id=f"{base}-blue-g2",
                state_dir=tmp_path / "blue-rebuilt",
                log_path=tmp_path / "blue-rebuilt.log",
                instance_id=f"{base}-blue-g2-0",
                env={
                    "CLICKS_TOPIC": clicks,
                    "COUNTS_TOPIC": counts,
                    "BATON_COLOR": "blue",
                    "BATON_CONTROL_TOPIC": control_topic(base),
                },
                extra_args=["--no-write-cache"],
            ).start()
            try:
                rebuilt.wait_ready(120)
                time.sleep(4)  # it replays the whole input while green keeps emitting
                result = flip(kafka_bootstrap, base, "blue", deadline_s=15)
                assert result.committed, result.reason
                time.sleep(1.5)
            except BaseException:
                rebuilt.stop()
                raise
        sent = steady.sent
        try:
            wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 120)
        finally:
            rebuilt.stop()
        assert_exact(kafka_bootstrap, counts, sent)


def test_quick_re_flips_while_the_old_active_drains_lose_nothing(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    """Hole 2: blue is far behind when the flip to green commits; flipping back at once must
    be refused until blue has drained (before the fix, blue's backlog was emitted by nobody)."""
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
        color_env={"blue": {"CLICK_DELAY_MS": "8"}},
    ):
        with SteadyInput(kafka_bootstrap, clicks, rate=250) as steady:
            time.sleep(4)  # blue handles ~120 records/s: it falls hundreds of records behind
            first = flip(kafka_bootstrap, base, "green", deadline_s=20, drain_timeout_s=0.2)
            assert first.committed and first.pending, first
            assert not first.drained and "has not emitted everything below the cut" in first.reason
            refused: list[FlipResult] = []
            back: FlipResult | None = None
            for _ in range(120):  # what an impatient user (or a retrying operator) does
                back = flip(kafka_bootstrap, base, "blue", deadline_s=20, drain_timeout_s=30)
                if back.committed:
                    break
                refused.append(back)
                time.sleep(0.25)
            assert back is not None and back.committed, back
            assert refused and all("is still draining" in r.reason for r in refused), refused[:2]
            time.sleep(1)
        sent = steady.sent
        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 180)
        assert_exact(kafka_bootstrap, counts, sent)


def test_partitions_moving_during_flips_keep_output_exact(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    """Hole 3: a member of each color dies just after the prepare, and its partitions move to
    the color's other member in a new group generation while the flip waits. The coordinator
    must combine the new generation's reports only; the new owner reads the control topic
    before it touches the partitions."""
    base, clicks, counts = app
    quick = {"BATON_KAFKA_CONFIG": '{"consumer.session.timeout.ms": "6000"}'}
    with running_colors(
        tmp_path,
        kafka_bootstrap,
        base,
        clicks,
        counts,
        per_color=2,
        color_env={"blue": quick, "green": quick},
    ) as workers:
        outcomes: list[FlipResult] = []
        with SteadyInput(kafka_bootstrap, clicks, rate=300) as steady:
            time.sleep(2)
            for to, victim in (("green", workers["blue"][1]), ("blue", workers["green"][1])):
                flipper = threading.Thread(
                    target=lambda to=to: outcomes.append(flip(kafka_bootstrap, base, to, deadline_s=25))
                )
                flipper.start()
                time.sleep(0.3)
                victim.kill()  # its partitions move after the session timeout, mid-flip
                flipper.join(90)
                victim.start()
                victim.wait_ready(120)
                time.sleep(2)
        sent = steady.sent
        assert [o.committed for o in outcomes] == [True, True], outcomes
        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 180)
        assert_exact(kafka_bootstrap, counts, sent)
        survivor = workers["blue"][0]
        generations = {
            line.get("generation")
            for line in survivor.logs()
            if line.get("msg") == "flip prepared: paused and reported"
        }
        assert len(generations) >= 2, f"blue's survivor reported for generations {generations}: nothing moved"


def test_a_prepare_nobody_decides_is_aborted_by_the_paused_workers(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    """Hole 4: a coordinator that dies after its prepare. The paused workers give up on their
    own clocks by writing an Abort (no wall clock is compared across machines), resume, and
    the next flip works."""
    base, clicks, counts = app
    with running_colors(tmp_path, kafka_bootstrap, base, clicks, counts, per_color=1):
        with SteadyInput(kafka_bootstrap, clicks, rate=200) as steady:
            time.sleep(2)
            topic = control_topic(base)
            orphan = Prepare(1, "green", timeout_ms=300)
            writer = ControlWriter(kafka_bootstrap, topic, f"{base}-dead-coordinator")
            writer.write((orphan.key(), orphan.encode()))
            writer.close()
            reader = ControlReader(kafka_bootstrap, topic)
            try:
                aborts: list[Abort] = []

                def heard_abort() -> bool:
                    aborts.extend(m for m in reader.poll(0.2) if isinstance(m, Abort))
                    return bool(aborts)

                wait_for("a worker's abort of the orphaned prepare", heard_abort, 60)
            finally:
                reader.close()
            assert aborts[0].epoch == 1 and "heard no decision" in aborts[0].reason
            result = flip(kafka_bootstrap, base, "green", deadline_s=15)
            assert result.committed and result.epoch == 2, result
            time.sleep(1.5)
        sent = steady.sent
        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 120)
        assert_exact(kafka_bootstrap, counts, sent)


def test_a_topology_that_cannot_be_spliced_refuses_flips_with_its_reason(
    new_topic: Callable[..., str], unique_name: str, kafka_bootstrap: str, tmp_path: Path
) -> None:
    """Hole 5: an aggregation over two topics merges them in fetch order, which differs between
    the colors; the flip is refused with a reason a person understands, and blue stays active."""
    base, a, b, counts = (
        unique_name,
        new_topic(partitions=2),
        new_topic(partitions=2),
        new_topic(partitions=2),
    )
    env = {"CLICKS_A": a, "CLICKS_B": b}
    topology = str(REPO / "tests" / "fixtures" / "copartitioned_counter.py")
    with running_colors(
        tmp_path,
        kafka_bootstrap,
        base,
        a,
        counts,
        per_color=1,
        topology=topology,
        color_env={"blue": env, "green": env},
    ):
        result = flip(kafka_bootstrap, base, "green", deadline_s=15)
    assert not result.committed
    assert "refuses the flip" in result.reason
    assert f"aggregates records of several topics ({', '.join(sorted((a, b)))})" in result.reason
