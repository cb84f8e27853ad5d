"""A custom processor with a store and a stream-time punctuator, SIGKILLed under exactly-once.

Each partition's ticks must come out exactly as an uninterrupted run makes them: one per
crossing of a 1-second boundary of stream time, carrying the partition's record count at
that moment. That holds only if the store, the forwarded records and the task's stream
time (committed as offset metadata) all come back together after every kill.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer

from baton.testing import read_all, wait_for
from baton.worker.runtime.punctuation import NO_TIME, crossed
from tests.support.event_time import event_time_origin
from tests.support.kills import start_workers

pytestmark = pytest.mark.integration

PARTITIONS, RECORDS, INTERVAL_MS = 4, 12_000, 1000

TOPOLOGY = """
import os
from baton import JSON, STR, Processor, PunctuationType, Topology

class Ticker(Processor):
    def init(self, context):
        super().init(context)
        self.counts = context.store("counts")
        context.schedule(1000, PunctuationType.STREAM_TIME, self.tick)

    def process(self, key, value):
        n = (self.counts.get(key) or 0) + 1
        self.counts.put(key, n)
        self.counts.put("~total", (self.counts.get("~total") or 0) + 1)
        self.context.forward(key, {"n": n})

    def tick(self, at):
        self.context.forward(f"~tick-{self.context.partition}", {"at": at, "total": self.counts.get("~total")})

topology = Topology()
topology.store("counts", key=STR, value=JSON)
(topology.stream(os.environ["IN"], key=STR, value=JSON)
    .process(Ticker, stores=["counts"])
    .to(os.environ["OUT"], value=JSON))
"""


def _input(seed: int, origin: int) -> list[tuple[int, str, int]]:
    """(partition, user, timestamp): time moves forward per partition from ``origin``, sometimes 0.5 s back."""
    rng = random.Random(seed)
    clock = [origin] * PARTITIONS
    out = []
    for _ in range(RECORDS):
        p = rng.randrange(PARTITIONS)
        clock[p] += rng.randrange(0, 25)
        out.append((p, f"u{p}-{rng.randrange(30)}", clock[p] - rng.choice([0, 0, 0, 500])))
    return out


def _expected_ticks(records: list[tuple[int, str, int]]) -> dict[int, list[tuple[int, int]]]:
    ticks: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
    stream_time = dict.fromkeys(range(PARTITIONS), NO_TIME)
    total = dict.fromkeys(range(PARTITIONS), 0)
    for p, _user, ts in records:
        total[p] += 1
        if ts > stream_time[p]:
            if crossed(INTERVAL_MS, stream_time[p], ts):
                ticks[p].append((ts, total[p]))
            stream_time[p] = ts
    return ticks


def test_punctuations_are_exactly_once_across_sigkills(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(PARTITIONS, name=f"{unique_name}-in")
    sink = new_topic(PARTITIONS, name=f"{unique_name}-out")
    module = tmp_path / "ticker.py"
    module.write_text(TOPOLOGY)
    records = _input(seed=5, origin=event_time_origin())
    expected = _expected_ticks(records)
    workers = start_workers(
        str(module),
        bootstrap=kafka_bootstrap,
        app=unique_name,
        tmp_path=tmp_path,
        env={"IN": source, "OUT": sink},
    )
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20})
    rng = random.Random(8)
    kills = 0
    try:
        for n, i in enumerate(range(0, RECORDS, 500)):  # explicit partitions: the ticks depend on them
            for p, user, ts in records[i : i + 500]:
                producer.produce(source, orjson.dumps({}), user.encode(), partition=p, timestamp=ts)
            assert producer.flush(30) == 0
            if n == 0:  # kills start once the workers process and commit
                wait_for("no output at all", lambda: read_all(kafka_bootstrap, sink), 90, every=0.5)
            time.sleep(0.5)
            if n % 4 == 3:  # every 2 s, after commits: the victim's tasks resume from committed state
                victim = workers[rng.randrange(2)]
                victim.kill()
                victim.wait(10)
                kills += 1
                victim.start()

        last: dict[int, list[tuple[int, int]]] = {}

        def difference() -> str:
            for p in range(PARTITIONS):
                mine, theirs = last.get(p, []), expected[p]
                at = next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if a != b), None)
                if at is not None or len(mine) != len(theirs):
                    i = at if at is not None else min(len(mine), len(theirs))
                    return f"partition {p}: {len(mine)} ticks, expected {len(theirs)}; from #{i}: {mine[i : i + 3]} vs {theirs[i : i + 3]}"
            return ""

        def ticks() -> dict[int, list[tuple[int, int]]] | None:
            got: dict[int, list[tuple[int, int]]] = {p: [] for p in range(PARTITIONS)}
            last.clear()
            last.update(got)
            counts: dict[str, list[int]] = {}
            for r in read_all(kafka_bootstrap, sink):
                assert r.key is not None and r.value is not None
                key, value = r.key.decode(), orjson.loads(r.value)
                if key.startswith("~tick-"):
                    got[int(key.removeprefix("~tick-"))].append((value["at"], value["total"]))
                else:
                    counts.setdefault(key, []).append(value["n"])
            for user, ns in counts.items():  # the store and the output moved together
                assert all(a < b for a, b in itertools.pairwise(ns)), f"{user}: {ns}"
            return got if got == expected else None

        wait_for("the ticks never matched an uninterrupted run", ticks, 180, every=2, detail=difference)
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
    assert kills >= 5
    assert sum(len(t) for t in expected.values()) > 100
