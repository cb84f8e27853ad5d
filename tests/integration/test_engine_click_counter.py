"""The click counter on the real broker: exact counts with two worker processes, clean SIGTERM."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER

from baton.testing import WorkerProcess, latest_by_key, produce, read_all, wait_for

pytestmark = pytest.mark.integration


def clicks(n: int, users: int, seed: int) -> tuple[list[tuple[bytes, bytes]], Counter[str]]:
    rng = random.Random(seed)
    records, expected = [], Counter[str]()
    for i in range(n):
        user = f"user-{rng.randrange(users)}"
        records.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": 1678886400 + i})))
        expected[user] += 1
    return records, expected


def counts_match(bootstrap: str, topic: str, expected: Counter[str]) -> bool:
    latest = latest_by_key(read_all(bootstrap, topic))
    got = {k.decode(): int(v) for k, v in latest.items() if k is not None and v is not None}
    return got == dict(expected)


def test_click_counter_100k_events_two_workers_exact(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    records, expected = clicks(100_000, users=1000, seed=1)
    env = {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink}
    workers = [
        WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=unique_name,
            state_dir=tmp_path / f"s{i}",
            log_path=tmp_path / f"w{i}.log",
            instance_id=f"w{i}",
            env=env,
        ).start()
        for i in range(2)
    ]
    # both in the group, four tasks each, before the input arrives (one worker alone would take ~1 s for all)
    wait_for(
        "the two workers never split the 8 partitions",
        lambda: all(
            w.alive and w.http("/readyz")[0] == 200 and w.metric("baton_tasks") == 4 for w in workers
        ),
        60,
        every=0.5,
    )
    produce(kafka_bootstrap, source, records)
    wait_for("counts never matched", lambda: counts_match(kafka_bootstrap, sink, expected), 120, every=2)
    processed = sum(w.metric("baton_records_consumed_total") for w in workers)
    assert processed == 100_000  # split across both workers, each record processed once
    assert all(w.metric("baton_records_consumed_total") > 0 for w in workers)
    for w in workers:
        assert w.stop(timeout=30) == 0
        assert any(line.get("msg") == "worker stopped" for line in w.logs())
