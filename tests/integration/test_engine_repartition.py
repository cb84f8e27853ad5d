"""A group-by through a repartition topic under SIGKILLs and exactly-once: exact counts, and the
repartition records the app committed past are deleted (Kafka Streams' repartition purge)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from confluent_kafka import Consumer, TopicPartition

from baton.testing import read_all, wait_for
from tests.support.kills import feed_while_killing, start_workers

pytestmark = pytest.mark.integration

TOPOLOGY = """
import os
from baton import JSON, STR, Topology

topology = Topology()
(topology.stream(os.environ["IN"], key=STR, value=JSON)
    .group_by(lambda _user, click: click["page"], key=STR, name="by-page")
    .count(store="page-counts")
    .to_stream()
    .to(os.environ["OUT"], value=JSON))
"""


def test_group_by_counts_stay_exact_and_consumed_repartition_records_are_purged(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(4, name=f"{unique_name}-clicks")
    sink = new_topic(4, name=f"{unique_name}-pages")
    module = tmp_path / "by_page.py"
    module.write_text(TOPOLOGY)
    rng = random.Random(17)
    clicks = [(f"u{rng.randrange(300)}", f"/p{rng.randrange(40)}") for _ in range(20_000)]
    expected = Counter(page for _, page in clicks)
    records = [(u.encode(), orjson.dumps({"page": p})) for u, p in clicks]
    workers = start_workers(
        str(module),
        bootstrap=kafka_bootstrap,
        app=unique_name,
        tmp_path=tmp_path,
        env={"IN": source, "OUT": sink},
        extra=["--repartition-purge-interval-ms", "0"],
    )
    try:
        kills = feed_while_killing(
            workers, bootstrap=kafka_bootstrap, topic=source, records=records, chunk=2000, min_kills=4, seed=3
        )

        def sequences() -> dict[str, list[int]] | None:
            seq: dict[str, list[int]] = {}
            for r in read_all(kafka_bootstrap, sink):
                assert r.key is not None and r.value is not None
                seq.setdefault(r.key.decode(), []).append(int(r.value))
            return seq if {k: v[-1] for k, v in seq.items()} == dict(expected) else None

        seq = wait_for("the page counts never became exact", sequences, 180, every=2)
        repartition = f"{unique_name}-by-page-repartition"
        reader = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"{unique_name}-probe"})
        try:

            def purged() -> list[tuple[int, int]] | None:
                marks = [
                    reader.get_watermark_offsets(TopicPartition(repartition, p), timeout=10) for p in range(4)
                ]
                return marks if all(low > 0 for low, _high in marks) else None

            marks = wait_for("no repartition record was ever purged", purged, 60, every=1)
        finally:
            reader.close()
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
    assert kills >= 4
    for page, counts in seq.items():  # read_committed output: strictly increasing per key
        assert all(a < b for a, b in itertools.pairwise(counts)), f"{page}: {counts}"
    assert sum(high for _low, high in marks) >= len(clicks)  # purged, not never written
