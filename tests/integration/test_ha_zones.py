"""Rack-aware standbys on the real broker: a zone outage is survived by promotions alone.

Six click-counter workers in three zones (two each, every one its own host: the instance
id), one standby per task, exactly-once. Every task's standby must be in another zone
than its active, as the workers' own "assignment received" lines report it. Then both
workers of one zone are SIGKILLed at once while input flows: each task they owned must
start on a survivor, the one that held its standby, as a *promoted* standby (never
restored from scratch), and every key's read-committed counts must be exactly 1..n.

The write cache is off, so every count is output: a gap (a lost update) shows as much as
a repeat (an update applied twice).

The changelogs are longer than acceptable.recovery.lag, as in production. Baton, like Kafka
Streams, counts a member with no state for a task as behind by the changelog's length, so
with short changelogs (this little input against the default lag of 10,000) every member
is "caught up" for every task: a survivor that held the standbys of two orphans may then
hand one of them to a member with no state, which restores it from scratch (seen in a run
of this test; restoring less than acceptable.recovery.lag counts as cheap). With longer
changelogs, balance instead warms a copy up and moves the task by a probing rebalance.
"""

from __future__ import annotations

import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER
from batondev.standbys import hosted_standbys, labelled_metric, roles, settled

from baton.testing import WorkerProcess, end_offsets, group_committed, produce, wait_for
from tests.support.click_counters import logged_errors
from tests.support.counts import assert_strictly_increasing, sequences_if_exact

pytestmark = pytest.mark.integration

PARTITIONS = 12
USERS = 96  # 3 to 12 of them on each partition
SESSION_MS = 6000
BEFORE = 9600  # clicks before the outage: 300 changelog records or more on every partition
RECOVERY_LAG = 100  # acceptable.recovery.lag: well above a standby's lag under input, below any changelog
ZONE = {f"w{i}": f"zone-{'abc'[i // 2]}" for i in range(6)}  # w0 w1: zone-a, w2 w3: zone-b, ...
LOST_ZONE = "zone-a"


def _click_chunks(
    seed: int, chunks: int, size: int, sent: Counter[str]
) -> Iterator[list[tuple[bytes, bytes]]]:
    """``chunks`` lists of ``size`` clicks of ``USERS`` users, counted into ``sent`` as they are made."""
    rng = random.Random(seed)
    for c in range(chunks):
        chunk = []
        for i in range(size):
            user = f"u{rng.randrange(USERS)}"
            chunk.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": c * size + i})))
            sent[user] += 1
        yield chunk


def _placement(workers: dict[str, WorkerProcess]) -> tuple[dict[int, str], dict[int, str]] | None:
    """Who runs each partition's active and who its standby, from the workers' latest assignments,
    once that is one active and one standby per task on two members, every standby hosted and
    caught up (its lag 0 on the worker's /metrics); else None."""
    got = {name: roles(w) for name, w in workers.items()}
    if any(r["warmup"] for r in got.values()):
        return None
    active = [(p, name) for name, r in got.items() for p in r["active"]]
    standby = [(p, name) for name, r in got.items() for p in r["standby"]]
    if sorted(p for p, _ in active) != list(range(PARTITIONS)):
        return None
    if sorted(p for p, _ in standby) != list(range(PARTITIONS)):
        return None
    active_of, standby_of = dict(active), dict(standby)
    if any(active_of[p] == standby_of[p] for p in range(PARTITIONS)):
        return None
    for name, w in workers.items():
        lag = labelled_metric(w, "baton_standby_lag_records")
        if (
            hosted_standbys(w) != got[name]["standby"]
            or len(lag) != len(got[name]["standby"])
            or any(lag.values())
        ):
            return None
    return active_of, standby_of


def _in_one_zone(active_of: dict[int, str], standby_of: dict[int, str]) -> dict[int, tuple[str, str]]:
    """The partitions whose active and standby share a zone: partition -> (active, standby)."""
    return {p: (a, standby_of[p]) for p, a in sorted(active_of.items()) if ZONE[a] == ZONE[standby_of[p]]}


def _workers(
    kafka_bootstrap: str, unique_name: str, tmp_path: Path, env: dict[str, str]
) -> dict[str, WorkerProcess]:
    """The six click counters, one standby per task, each in its zone (not started)."""
    return {
        name: WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=unique_name,
            state_dir=tmp_path / f"s-{name}",
            log_path=tmp_path / f"{name}.log",
            instance_id=name,  # also its host: six hosts on this one machine
            env=env,
            extra_args=[
                "--zone",
                zone,
                "--num-standby-replicas",
                "1",
                "--acceptable-recovery-lag",
                str(RECOVERY_LAG),
                "--probing-rebalance-interval-ms",
                "3000",  # the survivors' balancing moves (warmups) end within the test
                "--no-write-cache",
                "--commit-interval-ms",
                "200",
                "-X",
                f"consumer.session.timeout.ms={SESSION_MS}",
                "-X",
                "consumer.heartbeat.interval.ms=1000",
            ],
        )
        for name, zone in ZONE.items()
    }


def _assert_counts_exact(
    kafka_bootstrap: str, sink: str, sent: Counter[str], errors: Callable[[], str]
) -> None:
    """Every key's read-committed counts become exactly 1..n: no repeat, no gap."""
    sequences = wait_for(
        "counts never became exact",
        lambda: sequences_if_exact(kafka_bootstrap, sink, sent),
        90,
        every=1,
        detail=errors,
    )
    assert_strictly_increasing(sequences)
    gaps = {user: counts for user, counts in sequences.items() if counts != list(range(1, len(counts) + 1))}
    assert not gaps, f"counts with a gap (an update lost): {gaps}"


def _started_tasks(
    survivors: dict[str, WorkerProcess], seen: dict[str, int]
) -> dict[int, list[tuple[str, object]]]:
    """Partition -> (worker, kind) of every "active task started" the survivors logged after ``seen`` lines."""
    starts: dict[int, list[tuple[str, object]]] = {}
    for name, w in survivors.items():
        for line in w.logs()[seen[name] :]:
            if line.get("msg") == "active task started":
                starts.setdefault(int(str(line["task"]).split("_")[1]), []).append((name, line.get("kind")))
    return starts


def _assert_orphans_promoted(
    orphans: list[int],
    active_of: dict[int, str],
    standby_of: dict[int, str],
    starts: dict[int, list[tuple[str, object]]],
) -> None:
    """Each orphan started on the survivor that held its standby, promoted; none restored from scratch."""
    for p in orphans:
        assert (standby_of[p], "promoted") in starts.get(p, []), (
            f"partition {p} (active {active_of[p]}, standby {standby_of[p]}) was not promoted "
            f"from its standby: started {starts.get(p)}"
        )
    restored = {p: s for p, s in starts.items() if any(kind == "restored" for _name, kind in s)}
    assert not restored, f"tasks restored from scratch after the zone outage: {restored}"


def test_a_zone_outage_promotes_every_orphaned_task_and_counts_stay_exact(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(PARTITIONS, name=f"{unique_name}-clicks")
    sink = new_topic(PARTITIONS, name=f"{unique_name}-counts")
    workers = _workers(kafka_bootstrap, unique_name, tmp_path, {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink})
    sent: Counter[str] = Counter()
    before, during = list(_click_chunks(3, 4, BEFORE // 4, sent)), list(_click_chunks(5, 32, 30, sent))
    stop_feeding = threading.Event()

    def feed() -> None:
        for chunk in during:
            produce(kafka_bootstrap, source, chunk)
            if stop_feeding.wait(0.25):
                return

    feeder = threading.Thread(target=feed)

    def errors() -> str:  # a failed wait says why a worker stopped
        return logged_errors(workers.values())

    try:
        for w in workers.values():
            w.start()
        for w in workers.values():
            w.wait_ready(60)
        for chunk in before:  # state on every partition, so that a standby has something to hold
            produce(kafka_bootstrap, source, chunk)
        ends = end_offsets(kafka_bootstrap, source)
        wait_for(
            "input not committed",
            lambda: group_committed(kafka_bootstrap, unique_name, source, PARTITIONS) == ends,
            60,
            every=0.5,
            detail=errors,
        )
        changelog = end_offsets(kafka_bootstrap, f"{unique_name}-user-counts-store-changelog")
        assert min(changelog.values()) > 2 * RECOVERY_LAG, f"changelogs too short for the test: {changelog}"
        wait_for(
            "group never settled", lambda: settled(kafka_bootstrap, unique_name, workers), 60, detail=errors
        )
        active_of, standby_of = wait_for(
            "standbys not placed and caught up", lambda: _placement(workers), 60, every=0.5, detail=errors
        )

        # rack-aware: a zone outage never takes a task's active and its standby together
        same_zone = _in_one_zone(active_of, standby_of)
        assert not same_zone, f"standbys in their active's zone (partition: active, standby): {same_zone}"

        lost = [name for name, zone in ZONE.items() if zone == LOST_ZONE]
        orphans = sorted(p for p, name in active_of.items() if name in lost)
        assert orphans
        survivors = {name: w for name, w in workers.items() if name not in lost}
        seen = {name: len(w.logs()) for name, w in survivors.items()}  # what follows is the failover
        feeder.start()  # input flows through the outage and the failover (some 10-15 s)
        time.sleep(1.0)  # transactions are open when the zone goes
        for name in lost:
            workers[name].kill(signal.SIGKILL)
        for name in lost:
            workers[name].wait(10)
        feeder.join()

        _assert_counts_exact(kafka_bootstrap, sink, sent, errors)
        _assert_orphans_promoted(orphans, active_of, standby_of, _started_tasks(survivors, seen))

        # the two zones left still keep each task's two copies apart
        wait_for(
            "survivors never settled",
            lambda: settled(kafka_bootstrap, unique_name, survivors),
            60,
            detail=errors,
        )
        active_of, standby_of = wait_for(
            "survivors' standbys not placed and caught up", lambda: _placement(survivors), 60, every=0.5
        )
        same_zone = _in_one_zone(active_of, standby_of)
        assert not same_zone, f"after the outage, standbys in their active's zone: {same_zone}"
    finally:
        stop_feeding.set()
        if feeder.is_alive():
            feeder.join()
        for w in workers.values():
            if w.alive:
                w.stop(30)
