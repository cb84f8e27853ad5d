"""A stream joined with a global table under SIGKILLs and exactly-once: every worker holds the
whole table (its topic has fewer partitions than the stream, keyed unrelatedly), every
order comes out once with its product, and an update of the table reaches later records."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from baton.testing import produce, read_all, wait_for
from tests.support.kills import feed_while_killing, start_workers

pytestmark = pytest.mark.integration

TOPOLOGY = """
import os
from baton import JSON, STR, Topology

topology = Topology()
products = topology.global_table(os.environ["PRODUCTS"], key=STR, value=JSON, store="products")
(topology.stream(os.environ["ORDERS"], key=STR, value=JSON)
    .left_join(products, lambda o, p: {"order": o["id"], "name": p and p["name"]}, key=lambda _k, o: o["product"])
    .to(os.environ["OUT"], value=JSON))
"""


def test_every_worker_holds_the_whole_global_table_and_joins_exactly(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    products_topic = new_topic(3, name=f"{unique_name}-products")
    orders_topic = new_topic(4, name=f"{unique_name}-orders")
    sink = new_topic(4, name=f"{unique_name}-out")
    module = tmp_path / "global_join.py"
    module.write_text(TOPOLOGY)
    products = {f"p{i}": f"item {i}" for i in range(200)}
    produce(
        kafka_bootstrap,
        products_topic,
        [(k.encode(), orjson.dumps({"name": v})) for k, v in products.items()],
    )
    rng = random.Random(3)
    # keyed by customer: an order's product sits in any partition of the table's topic
    orders = [(f"c{rng.randrange(40)}", i, f"p{rng.randrange(210)}") for i in range(8000)]
    workers = start_workers(
        str(module),
        bootstrap=kafka_bootstrap,
        app=unique_name,
        tmp_path=tmp_path,
        env={"PRODUCTS": products_topic, "ORDERS": orders_topic, "OUT": sink},
    )
    try:
        kills = feed_while_killing(
            workers,
            bootstrap=kafka_bootstrap,
            topic=orders_topic,
            records=[(c.encode(), orjson.dumps({"id": i, "product": p})) for c, i, p in orders],
            chunk=800,
            min_kills=3,
            seed=4,
        )
        expected = Counter((c, i, products.get(p)) for c, i, p in orders)
        last: list[str] = [""]

        def joined() -> bool:
            got = Counter[tuple[str, int, str | None]]()
            for r in read_all(kafka_bootstrap, sink):
                assert r.key is not None and r.value is not None
                doc = orjson.loads(r.value)
                got[r.key.decode(), doc["order"], doc["name"]] += 1
            missing, extra = expected - got, got - expected
            last[0] = f"{sum(missing.values())} missing, {sum(extra.values())} extra, e.g. {list(extra)[:3]}"
            return not missing and not extra

        wait_for("the join never matched the table", joined, 180, every=2, detail=lambda: last[0])

        # the table is followed after the start: an update reaches records processed after it
        produce(kafka_bootstrap, products_topic, [(b"p7", orjson.dumps({"name": "renamed"}))])

        def renamed() -> bool:
            produce(kafka_bootstrap, orders_topic, [(b"probe", orjson.dumps({"id": -1, "product": "p7"}))])
            return any(
                r.key == b"probe" and orjson.loads(r.value or b"{}")["name"] == "renamed"
                for r in read_all(kafka_bootstrap, sink)
            )

        wait_for("the table update never reached the join", renamed, 60, every=2)
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
    assert kills >= 3
