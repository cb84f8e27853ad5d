"""Exactly-once with standbys on: 5 SIGKILLs and restarts while input flows keep counts exact.

Kills alternate between a quick restart (static membership: same partitions back) and a
restart after the session timeout (the group moves the dead worker's tasks, some onto
their standbys, which are promoted). Standbys only ever read committed changelog data,
so a promoted store never holds an aborted transaction's update.
"""

from __future__ import annotations

import itertools
import random
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER

from baton.testing import WorkerProcess, produce, read_all, wait_for

pytestmark = pytest.mark.integration

EVENTS = 40_000
USERS = 300
SESSION_MS = 6000


def test_counts_stay_exact_across_kills_with_standbys(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    env = {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink}
    rng = random.Random(21)
    records, expected = [], Counter[str]()
    for i in range(EVENTS):
        user = f"u{rng.randrange(USERS)}"
        records.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": i})))
        expected[user] += 1
    workers = [
        WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=unique_name,
            state_dir=tmp_path / f"s{i}",
            log_path=tmp_path / f"w{i}.log",
            instance_id=f"w{i}",
            env=env,
            extra_args=[
                "--num-standby-replicas",
                "1",
                "--commit-interval-ms",
                "200",
                "-X",
                f"consumer.session.timeout.ms={SESSION_MS}",
                "-X",
                "consumer.heartbeat.interval.ms=1000",
            ],
        ).start()
        for i in range(3)
    ]
    chunks = [records[i : i + 1000] for i in range(0, len(records), 1000)]

    def feed() -> None:
        for chunk in chunks:
            produce(kafka_bootstrap, source, chunk)
            time.sleep(0.5)

    feeder = threading.Thread(target=feed)
    try:
        for w in workers:
            w.wait_ready(60)
        feeder.start()
        for kill in range(5):
            time.sleep(rng.uniform(0.5, 2.0))
            victim = workers[kill % 3]
            victim.kill(signal.SIGKILL)
            victim.wait(10)
            if kill % 2:  # stay dead past the session timeout: the group moves its tasks
                time.sleep(SESSION_MS / 1000 + 2)
            victim.start()
        feeder.join()

        def final() -> dict[str, list[int]] | None:
            seq: dict[str, list[int]] = {}
            for r in read_all(kafka_bootstrap, sink):
                assert r.key is not None and r.value is not None
                seq.setdefault(r.key.decode(), []).append(int(r.value))
            return seq if {k: v[-1] for k, v in seq.items()} == dict(expected) else None

        sequences = wait_for("counts never became exact", final, 180, every=2)
        for user, counts in sequences.items():  # read_committed output: no count repeats or goes backwards
            assert all(a < b for a, b in itertools.pairwise(counts)), (
                f"{user} repeated or went backwards: {counts}"
            )
        promoted = sum(
            1 for w in workers for x in w.logs(current_run_only=False) if x.get("msg") == "standby promoted"
        )
        assert promoted >= 1, "no task was ever promoted from a standby"
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
