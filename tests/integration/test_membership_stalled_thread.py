"""A processing thread stalled in user code past the revocation wait can never commit afterwards.

The stall (75 s in a ``peek``, the GIL released, as a slow network call would) outlasts the
membership thread's wait for the revoked tasks' last commit (60 s). The member then rejoins
under its own member id while its processing thread still holds the tasks, and the other
worker takes them and commits. When the stalled thread wakes, its commit must be refused:
it names the generation under which that thread last applied its assignment, which the
broker no longer accepts (exactly-once: the transactional offset commit; at-least-once: the
offset commit is refused before it is sent). The session timeout is long (120 s), so the
stalled member stays in the group on its heartbeats: only the rebalance moves its tasks.

Exactly-once: read_committed counts strictly 1..n per user. At-least-once: the committed
offsets, sampled every 0.5 s, never go backwards.
"""

from __future__ import annotations

import datetime
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from batondev.paths import REPO
from confluent_kafka import Consumer, TopicPartition

from baton.testing import SteadyInput, WorkerProcess, group_committed, wait_for
from tests.support.click_counters import logged_errors
from tests.support.counts import assert_strictly_increasing, count_sequences, sequences_if_exact

pytestmark = pytest.mark.integration

# the failover bench's stalling click counter: one topology for the bench and these tests
STALLING = REPO / "bench" / "topologies" / "stalling_click_counter.py"
SESSION_MS = 120_000
STALL_SECONDS = 75


def _workers(
    bootstrap: str,
    app: str,
    topics: tuple[str, str],
    tmp: Path,
    *,
    flag: Path,
    stall_seconds: float,
    extra_args: list[str],
    guarantee: str = "exactly_once_v2",
) -> tuple[WorkerProcess, WorkerProcess]:
    """ "first" and "second" of one app; only the first's user code stalls, once ``flag`` exists."""
    source, sink = topics
    first, second = (
        WorkerProcess(
            STALLING,
            bootstrap=bootstrap,
            application_id=app,
            state_dir=tmp / name,
            log_path=tmp / f"{name}.log",
            guarantee=guarantee,
            env={
                "CLICKS_TOPIC": source,
                "COUNTS_TOPIC": sink,
                "STALL_FLAG": str(flag if name == "first" else tmp / "never"),  # only the first stalls
                "STALL_SECONDS": str(stall_seconds),
            },
            extra_args=extra_args,
        )
        for name in ("first", "second")
    )
    return first, second


class OffsetSampler:
    """The group's committed offsets every 0.5 s, in a thread; remembers any that went back."""

    def __init__(self, bootstrap: str, group: str, topic: str, partitions: int) -> None:
        self._consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self._tps = [TopicPartition(topic, p) for p in range(partitions)]
        self.backwards: list[tuple[int, int, int]] = []  # (partition, before, after)
        self.samples = 0
        self._last: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for tp in self._consumer.committed(self._tps, timeout=10):
                if tp.offset < 0:
                    continue
                before = self._last.get(tp.partition, -1)
                if tp.offset < before:
                    self.backwards.append((tp.partition, before, tp.offset))
                self._last[tp.partition] = max(before, tp.offset)
            self.samples += 1

    def __enter__(self) -> OffsetSampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)
        self._consumer.close()


@pytest.mark.parametrize("guarantee", ["exactly_once_v2", "at_least_once"])
def test_a_thread_stalled_past_the_revocation_wait_never_commits_after_it(
    guarantee: str, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(4, name=f"{unique_name}-clicks")
    sink = new_topic(4, name=f"{unique_name}-counts")
    flag = tmp_path / "stall"
    extra = ["-X", f"consumer.session.timeout.ms={SESSION_MS}"]
    if guarantee == "at_least_once":
        extra += ["--commit-interval-ms", "1000"]
    first, second = _workers(
        kafka_bootstrap,
        unique_name,
        (source, sink),
        tmp_path,
        flag=flag,
        stall_seconds=STALL_SECONDS,
        extra_args=extra,
        guarantee=guarantee,
    )

    def errors() -> str:
        return logged_errors((first, second))

    def counts_detail() -> str:
        got = count_sequences(kafka_bootstrap, sink)
        wrong = {u: (feed.sent[u], seq[-8:]) for u, seq in got.items() if seq[-1] != feed.sent[u]}
        return f"users whose last count differs (sent, last counts): {wrong}\n{errors()}"

    feed = SteadyInput(kafka_bootstrap, source, rate=300)
    sampler = OffsetSampler(kafka_bootstrap, unique_name, source, 4)
    try:
        with sampler:
            with feed:
                _stall_through_a_rebalance(first, second, flag, errors)
            if guarantee == "exactly_once_v2":  # both workers run on: every click gets counted
                sequences = wait_for(
                    "counts never became exact",
                    lambda: sequences_if_exact(kafka_bootstrap, sink, feed.sent),
                    90,
                    every=2,
                    detail=counts_detail,
                )
                assert_strictly_increasing(sequences)
            else:
                time.sleep(5)  # a few more commits by both
            first.stop(30)
            second.stop(30)
        assert sampler.samples > 20
        assert sampler.backwards == [], f"committed offsets went backwards: {sampler.backwards}"
    finally:
        for w in (first, second):
            if w.alive:
                w.kill(signal.SIGKILL)
                w.wait(10)


def _stall_through_a_rebalance(
    first: WorkerProcess, second: WorkerProcess, flag: Path, errors: Callable[[], str]
) -> None:
    """The first stalls in user code; the second joins meanwhile, and its join's rebalance
    waits out the first's revocation; the first wakes once the second has counted."""
    first.start().wait_ready(60)
    wait_for("the first worker counted nothing", lambda: first.metric("baton_records_consumed_total"), 60)
    flag.touch()
    wait_for("the user code never stalled", lambda: _logged(first, "bench: user code stalls"), 30)
    second.start()  # its join moves tasks away from the stalled first
    wait_for(
        "the second worker never counted",
        lambda: second.metric("baton_records_consumed_total"),
        STALL_SECONDS + 30,
        detail=errors,
    )
    wait_for(
        "the stall never ended", lambda: _logged(first, "bench: user code stall over"), STALL_SECONDS + 30
    )
    time.sleep(8)  # the woken thread's commits, refused or not, are in by now


STUCK_POLL_MS = 20_000
STUCK_SESSION_MS = 10_000


def test_a_thread_stuck_for_good_leaves_the_group_and_its_tasks_move(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """With max.poll.interval.ms=20000 the stuck member leaves the group, /healthz says so, and
    every user's count moves on from the other worker within 20 s + the session + 15 s."""
    source = new_topic(4, name=f"{unique_name}-clicks")
    sink = new_topic(4, name=f"{unique_name}-counts")
    flag = tmp_path / "stall"
    first, second = _workers(
        kafka_bootstrap,
        unique_name,
        (source, sink),
        tmp_path,
        flag=flag,
        stall_seconds=600,  # for good, as far as this test goes
        extra_args=[
            "-X",
            f"consumer.max.poll.interval.ms={STUCK_POLL_MS}",
            "-X",
            f"consumer.session.timeout.ms={STUCK_SESSION_MS}",
        ],
    )
    feed = SteadyInput(kafka_bootstrap, source, rate=200)
    try:
        with feed:
            first.start().wait_ready(60)
            second.start().wait_ready(60)
            wait_for(
                "both workers count",
                lambda: min(w.metric("baton_records_consumed_total") for w in (first, second)),
                60,
            )
            flag.touch()
            wait_for("the user code never stalled", lambda: _logged(first, "bench: user code stalls"), 30)
            # exactly-once: a committed input offset is committed output, so a partition whose
            # committed offset moves on produces output again
            at_stall = group_committed(kafka_bootstrap, unique_name, source, 4)

            def every_partition_moved_on() -> bool:
                now = group_committed(kafka_bootstrap, unique_name, source, 4)
                return all(now[p] > at_stall[p] + 20 for p in range(4))

            deadline = STUCK_POLL_MS / 1000 + STUCK_SESSION_MS / 1000 + 15
            wait_for(
                "the stuck member's partitions never moved on", every_partition_moved_on, deadline, every=1
            )
            left = _logged_at(
                first,
                "processing thread stalled past max.poll.interval.ms; leaving the group until it is back",
            )
            assert left, "the stuck member never said it left the group"
            # A dynamic member's LeaveGroup goes out at once, so the other worker is assigned the
            # partitions within a heartbeat or two. Closing the client used to run the revocation
            # listener first, which waited for the stuck thread and blocked the LeaveGroup and the
            # heartbeats: the partitions moved only when the session (10 s) expired.
            taken = [t for t in _logged_at(second, "rebalance: assign") if t > left[0]]
            assert taken, "the other worker was never assigned the stuck member's partitions"
            assert taken[0] - left[0] < STUCK_SESSION_MS / 2000, (
                f"the other worker took over {taken[0] - left[0]:.1f} s after the stuck member left: "
                "it waited for the session to expire (no LeaveGroup sent at once)"
            )
            status, _body = first.http("/healthz")
            assert status != 200, "a member out of the group for a stuck thread is not healthy"
    finally:
        for w in (first, second):
            if w.alive:
                w.kill(signal.SIGKILL)
                w.wait(10)


def _logged(worker: WorkerProcess, msg: str) -> bool:
    return any(x.get("msg") == msg for x in worker.logs())


def _logged_at(worker: WorkerProcess, msg: str) -> list[float]:
    """When ``worker`` logged ``msg``: seconds since the epoch, in order."""
    return [
        datetime.datetime.fromisoformat(str(x["ts"])).timestamp()
        for x in worker.logs()
        if x.get("msg") == msg
    ]
