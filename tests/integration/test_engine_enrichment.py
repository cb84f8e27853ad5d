"""examples/enrichment.py as shipped, under SIGKILLs and exactly-once: every click enriched
once, and every order's foreign-key join result exact, each update strictly newer than the
one before it (a duplicate or a stale answer fails it)."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from baton.testing import produce, read_all, wait_for
from examples.enrichment import enrich_order
from tests.support.kills import feed_topics_while_killing, start_workers

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
USERS, PRODUCTS, ORDERS, VERSIONS = 50, 30, 1500, 4


def test_enrichment_example_joins_exactly_under_kills(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    # products on 3 partitions, orders on 4: a foreign-key join needs no co-partitioning
    names = {
        "CLICKS": new_topic(4, name=f"{unique_name}-clicks"),
        "USERS": new_topic(4, name=f"{unique_name}-users"),
        "CLICKS_ENRICHED": new_topic(4, name=f"{unique_name}-clicks-enriched"),
        "ORDERS": new_topic(4, name=f"{unique_name}-orders"),
        "PRODUCTS": new_topic(3, name=f"{unique_name}-products"),
        "ORDERS_ENRICHED": new_topic(4, name=f"{unique_name}-orders-enriched"),
    }
    rng = random.Random(11)
    users = {
        f"u{i}": {"country": rng.choice(["DE", "FR", "JP"]), "plan": rng.choice(["free", "pro"])}
        for i in range(USERS)
    }
    produce(kafka_bootstrap, names["USERS"], [(k.encode(), orjson.dumps(v)) for k, v in users.items()])
    clicks = [(f"u{rng.randrange(USERS + 5)}", i) for i in range(6000)]  # some users unknown

    product_of = {f"o{i}": f"p{rng.randrange(PRODUCTS)}" for i in range(ORDERS)}
    products: list[tuple[str, dict[str, Any]]] = []
    for version in range(1, 21):  # prices only rise; half the versions come while workers die
        products += [
            (f"p{i}", {"name": f"item {i}", "price_cents": 100 * i + version, "version": version})
            for i in range(PRODUCTS)
        ]
    orders = [
        (o, {"product_id": p, "quantity": v, "version": v})
        for v in range(1, VERSIONS + 1)
        for o, p in product_of.items()
    ]

    def encoded(rows: list[tuple[str, dict[str, Any]]]) -> list[tuple[bytes, bytes]]:
        return [(k.encode(), orjson.dumps(v)) for k, v in rows]

    produce(kafka_bootstrap, names["PRODUCTS"], encoded(products[: len(products) // 2]))
    workers = start_workers(
        str(REPO / "examples" / "enrichment.py"),
        bootstrap=kafka_bootstrap,
        app=unique_name,
        tmp_path=tmp_path,
        env={f"{k}_TOPIC": v for k, v in names.items()},
    )
    try:
        kills = feed_topics_while_killing(
            workers,
            bootstrap=kafka_bootstrap,
            feeds=[
                (names["ORDERS"], encoded(orders), 500),
                (names["PRODUCTS"], encoded(products[len(products) // 2 :]), 50),
                (names["CLICKS"], [(u.encode(), orjson.dumps({"id": i})) for u, i in clicks], 600),
            ],
            min_kills=2,
        )

        expected_clicks = Counter((u, i, users[u]["country"] if u in users else None) for u, i in clicks)
        final_product = dict(products)
        expected_orders = {
            o: enrich_order({"product_id": p, "quantity": VERSIONS, "version": VERSIONS}, final_product[p])
            for o, p in product_of.items()
        }
        seen: dict[str, Any] = {}

        def detail() -> str:
            return str(seen)

        def clicks_done() -> bool:
            got = Counter[tuple[str, int, str | None]]()
            for r in read_all(kafka_bootstrap, names["CLICKS_ENRICHED"]):
                assert r.key is not None and r.value is not None
                doc = orjson.loads(r.value)
                got[r.key.decode(), doc["id"], doc["country"]] += 1
            missing, extra = expected_clicks - got, got - expected_clicks
            seen["clicks"] = (
                f"{sum(missing.values())} missing, {sum(extra.values())} extra, e.g. {list(extra)[:3]}"
            )
            return not missing and not extra

        def orders_done() -> bool:
            history: dict[str, list[Any]] = {}
            for r in read_all(kafka_bootstrap, names["ORDERS_ENRICHED"]):
                assert r.key is not None
                history.setdefault(r.key.decode(), []).append(
                    None if r.value is None else orjson.loads(r.value)
                )
            latest = {k: v[-1] for k, v in history.items()}
            wrong = [k for k in expected_orders if latest.get(k) != expected_orders[k]]
            seen["orders"] = (
                f"{len(wrong)} of {ORDERS} not final, e.g. {[(k, latest.get(k)) for k in wrong[:2]]}"
            )
            if wrong:
                return False
            for key, updates in history.items():  # each update newer than the one before it
                versions = [(u["version"], u["product_version"]) for u in updates]
                for before, after in itertools.pairwise(versions):
                    assert before != after and after[0] >= before[0] and after[1] >= before[1], (
                        key,
                        versions,
                    )
            return True

        wait_for("the enriched clicks never matched", clicks_done, 120, every=2, detail=detail)
        wait_for("the enriched orders never matched", orders_done, 120, every=2, detail=detail)
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
    assert kills >= 6
