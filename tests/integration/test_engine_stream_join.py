"""A windowed stream-stream left join under SIGKILLs and exactly-once: every pair once, every
lonely click once (after its window closed), nothing else."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Producer

from baton.testing import end_offsets, group_committed, produce, read_all, wait_for
from tests.support.event_time import event_time_origin
from tests.support.kills import feed_while_killing, start_workers

pytestmark = pytest.mark.integration

PARTITIONS, WINDOW_MS = 4, 500

TOPOLOGY = """
import os
from baton import JSON, STR, Topology, within

topology = Topology()
clicks = topology.stream(os.environ["CLICKS"], key=STR, value=JSON)
views = topology.stream(os.environ["VIEWS"], key=STR, value=JSON)
(clicks.left_join(views, lambda c, v: {"click": c["id"], "view": v and v["id"]},
                  windows=within(500, grace=120_000), name="click-view")
    .to(os.environ["OUT"], value=JSON))
"""


def test_left_join_pairs_and_lonely_clicks_come_out_exactly_once(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    clicks_topic = new_topic(PARTITIONS, name=f"{unique_name}-clicks")
    views_topic = new_topic(PARTITIONS, name=f"{unique_name}-views")
    sink = new_topic(PARTITIONS, name=f"{unique_name}-out")
    module = tmp_path / "click_view.py"
    module.write_text(TOPOLOGY)
    rng = random.Random(6)
    origin = event_time_origin()
    clicks = [(f"c{i}", f"u{rng.randrange(60)}", origin + rng.randrange(60_000)) for i in range(6000)]
    views = [(f"v{i}", f"u{rng.randrange(60)}", origin + rng.randrange(60_000)) for i in range(6000)]
    expected = Counter[tuple[str, str, str | None]]()
    for cid, user, ts in clicks:
        partners = [vid for vid, u, vts in views if u == user and abs(vts - ts) <= WINDOW_MS]
        for vid in partners:
            expected[user, cid, vid] += 1
        if not partners:
            expected[user, cid, None] += 1

    def encoded(rows: list[tuple[str, str, int]]) -> list[tuple[bytes, bytes, int]]:
        return [(u.encode(), orjson.dumps({"id": rid}), ts) for rid, u, ts in rows]

    produce(kafka_bootstrap, views_topic, encoded(views))
    workers = start_workers(
        str(module),
        bootstrap=kafka_bootstrap,
        app=unique_name,
        tmp_path=tmp_path,
        env={"CLICKS": clicks_topic, "VIEWS": views_topic, "OUT": sink},
    )
    try:
        kills = feed_while_killing(
            workers,
            bootstrap=kafka_bootstrap,
            topic=clicks_topic,
            records=encoded(clicks),  # type: ignore[arg-type]
            chunk=600,
            min_kills=3,
            seed=2,
        )

        def consumed() -> bool:  # both inputs fully processed and committed
            return all(
                group_committed(kafka_bootstrap, unique_name, t, PARTITIONS)
                == end_offsets(kafka_bootstrap, t)
                for t in (clicks_topic, views_topic)
            )

        # A task orders its two topics by timestamp only within a poll's batch (it does not
        # wait for an input with nothing fetched): a far-future record fetched before the
        # other topic's backlog would make that backlog late. So the record that
        # closes every window goes in only once everything before it was processed.
        wait_for("the inputs were never fully processed", consumed, 120, every=1)
        producer = Producer({"bootstrap.servers": kafka_bootstrap})
        # past a minute of events and two of grace; the broker takes timestamps up to an hour ahead
        end = origin + 5 * 60_000
        for p in range(PARTITIONS):  # stream time past every window on every task: they all close
            producer.produce(clicks_topic, orjson.dumps({"id": "end"}), b"~end", partition=p, timestamp=end)
        assert producer.flush(30) == 0

        last: list[Counter[tuple[str, str, str | None]]] = [Counter()]

        def difference() -> str:
            missing, extra = expected - last[0], last[0] - expected
            return f"{sum(missing.values())} missing, e.g. {list(missing)[:3]}; {sum(extra.values())} extra, e.g. {list(extra)[:3]}"

        def joined() -> Counter[tuple[str, str, str | None]] | None:
            got = last[0] = Counter[tuple[str, str, str | None]]()
            for r in read_all(kafka_bootstrap, sink):
                assert r.key is not None and r.value is not None
                doc = orjson.loads(r.value)
                got[r.key.decode(), doc["click"], doc["view"]] += 1
            return got if got == expected else None

        wait_for("the join's output never matched the offline join", joined, 180, every=2, detail=difference)
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
    assert kills >= 3
    assert sum(1 for *_, v in expected if v is None) > 100 and sum(1 for *_, v in expected if v) > 100
