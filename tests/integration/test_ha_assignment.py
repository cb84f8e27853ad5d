"""Baton's own assignor on the real broker: zombies fenced, co-partitioned inputs kept together,
a new member warmed up before it owns anything.

Exactly-once fencing is the broker's, through the group generation carried in every
transactional offset commit (see ``baton/worker/assignment/membership.py``): a worker
frozen past the session timeout loses its tasks, and when it wakes its open transaction
must fail instead of committing output for tasks it no longer owns.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER, FIXTURES
from batondev.standbys import describe, labelled_metric, roles

from baton.testing import WorkerProcess, latest_by_key, produce, read_all, wait_for
from tests.support.counts import assert_strictly_increasing, count_sequences

pytestmark = pytest.mark.integration

SESSION_MS = 6000


def _workers(
    n: int,
    bootstrap: str,
    app: str,
    tmp_path: Path,
    env: dict[str, str],
    *extra: str,
    topology: str | Path = CLICK_COUNTER,
) -> list[WorkerProcess]:
    return [
        WorkerProcess(
            topology,
            bootstrap=bootstrap,
            application_id=app,
            state_dir=tmp_path / f"s{i}",
            log_path=tmp_path / f"w{i}.log",
            instance_id=f"w{i}",
            env=env,
            extra_args=[
                "-X",
                f"consumer.session.timeout.ms={SESSION_MS}",
                "-X",
                "consumer.heartbeat.interval.ms=1000",
                *extra,
            ],
        )
        for i in range(n)
    ]


def test_a_zombie_is_fenced_and_the_output_has_no_duplicate(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """SIGSTOP one worker past the session timeout (but inside the transaction timeout), SIGCONT it."""
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    env = {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink}
    rng = random.Random(7)
    expected: Counter[str] = Counter()
    chunks = []
    for c in range(60):
        chunk = []
        for i in range(500):
            user = f"u{rng.randrange(200)}"
            chunk.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": c * 500 + i})))
            expected[user] += 1
        chunks.append(chunk)
    workers = _workers(
        3,
        kafka_bootstrap,
        unique_name,
        tmp_path,
        env,
        "--num-standby-replicas",
        "1",
        "--commit-interval-ms",
        "100",
    )
    for w in workers:
        w.start()
    stop_feeding = threading.Event()

    def feed() -> None:
        for chunk in chunks:
            produce(kafka_bootstrap, source, chunk)
            if stop_feeding.wait(0.25):
                return

    feeder = threading.Thread(target=feed)
    try:
        for w in workers:
            w.wait_ready(60)
        wait_for("group not stable", lambda: describe(kafka_bootstrap, unique_name, expect_members=3), 60)
        feeder.start()
        time.sleep(3)
        zombie = workers[1]
        before = len(zombie.logs())
        zombie.kill(signal.SIGSTOP)
        try:
            # its tasks move while it sleeps: the group is stable with the two others
            wait_for(
                "the frozen worker's tasks never moved",
                lambda: describe(kafka_bootstrap, unique_name, expect_members=2),
                SESSION_MS / 1000 + 20,
                every=0.5,
            )
        finally:
            zombie.kill(signal.SIGCONT)
        feeder.join()

        def exact() -> dict[str, list[int]] | None:
            seq = count_sequences(kafka_bootstrap, sink)
            return seq if {k: v[-1] for k, v in seq.items()} == dict(expected) else None

        sequences = wait_for("counts never became exact", exact, 180, every=2)
        assert_strictly_increasing(sequences)
        woke = zombie.logs()[before:]
        failed = [
            x for x in woke if x.get("msg") in ("commit failed, aborting the transaction", "partitions lost")
        ]
        assert failed, "the zombie neither failed a commit nor lost its partitions after waking"
    finally:
        stop_feeding.set()
        for w in workers:
            if w.alive:
                w.kill(signal.SIGCONT)
                w.stop(30)


def test_co_partitioned_inputs_stay_one_task_on_one_member(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    a = new_topic(6, name=f"{unique_name}-a")
    b = new_topic(6, name=f"{unique_name}-b")
    sink = new_topic(6, name=f"{unique_name}-counts")
    env = {"CLICKS_A": a, "CLICKS_B": b, "COUNTS_TOPIC": sink}
    workers = _workers(
        3,
        kafka_bootstrap,
        unique_name,
        tmp_path,
        env,
        "--num-standby-replicas",
        "1",
        topology=str(FIXTURES / "copartitioned_counter.py"),
    )
    expected: Counter[str] = Counter()

    def feed(n: int) -> None:
        batch_a = [(f"u{i % 60}".encode(), b"x") for i in range(n)]
        batch_b = [(f"u{i % 45}".encode(), b"y") for i in range(n)]
        expected.update(k.decode() for k, _v in batch_a + batch_b)
        produce(kafka_bootstrap, a, batch_a)
        produce(kafka_bootstrap, b, batch_b)

    def together(members: int) -> None:
        group = wait_for(
            f"group of {members} not stable",
            lambda: describe(kafka_bootstrap, unique_name, expect_members=members),
            60,
        )
        owners: dict[tuple[str, int], str] = {tp: m.identity for m in group for tp in m.partitions}
        assert len(owners) == 12
        for p in range(6):
            assert owners[(a, p)] == owners[(b, p)], (
                f"partition {p} of the two inputs on two members: {owners}"
            )

    def counts_match() -> bool:
        got = {
            k.decode(): int(v) for k, v in latest_by_key(read_all(kafka_bootstrap, sink)).items() if k and v
        }
        return got == dict(expected)

    try:
        workers[0].start()
        workers[0].wait_ready(60)
        together(1)
        feed(600)
        for w in workers[1:]:  # members join one at a time: every rebalance keeps each task whole
            w.start()
            w.wait_ready(60)
        together(3)
        wait_for("warmups never finished", lambda: all(not roles(w)["warmup"] for w in workers) or None, 60)
        feed(600)
        workers[2].kill(signal.SIGKILL)
        workers[2].wait(10)
        together(2)
        feed(600)
        wait_for("counts of the two inputs never matched", counts_match, 90, every=1)
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)


def test_a_new_member_warms_up_before_it_receives_actives(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """Scale-out 3 -> 4 under input: the newcomer gets warmups first, actives after a probing rebalance."""
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    env = {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink}
    workers = _workers(
        4,
        kafka_bootstrap,
        unique_name,
        tmp_path,
        env,
        "--num-standby-replicas",
        "1",
        "--acceptable-recovery-lag",
        "100",
        "--max-warmup-replicas",
        "2",
        "--probing-rebalance-interval-ms",
        "3000",
    )
    keys = [(f"k{i}".encode(), orjson.dumps({"user_id": f"k{i}", "timestamp": i})) for i in range(40_000)]
    try:
        for w in workers[:3]:
            w.start()
        for w in workers[:3]:
            w.wait_ready(60)
        produce(kafka_bootstrap, source, keys)
        wait_for(
            "not counted",
            lambda: len(latest_by_key(read_all(kafka_bootstrap, sink))) == len(keys),
            120,
            every=1,
        )
        newcomer = workers[3].start()

        def first_roles() -> dict[str, set[int]] | None:
            got = [x for x in newcomer.logs() if x.get("msg") == "assignment received"]
            return roles(newcomer) if got else None

        first = wait_for("the newcomer never got an assignment", first_roles, 60)
        assert not first["active"], f"the newcomer got actives before warming up: {first}"
        assert first["warmup"] or first["standby"], first
        wait_for("the newcomer was never meant to own a task", lambda: roles(newcomer)["active"] or None, 90)
        # the partitions follow one rebalance later (the old owner releases them first)
        starts = wait_for(
            "the newcomer never started an active task",
            lambda: labelled_metric(newcomer, "baton_task_starts_total") or None,
            60,
        )
        assert starts.get('{kind="restored"}', 0) == 0, f"the newcomer restored a task from scratch: {starts}"
        assert starts.get('{kind="promoted"}', 0) >= 1, starts
        produce(
            kafka_bootstrap,
            source,
            [(k, orjson.dumps({"user_id": k.decode(), "timestamp": 1})) for k, _v in keys[:1000]],
        )
        wait_for(
            "second clicks not counted",
            lambda: (
                all(
                    int(v or 0) == 2
                    for k, v in latest_by_key(read_all(kafka_bootstrap, sink)).items()
                    if k in {x for x, _ in keys[:1000]}
                )
                or None
            ),
            60,
        )
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
