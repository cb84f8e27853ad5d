"""Table operations and a table-table join under SIGKILLs and exactly-once: a grouped
aggregation with a subtractor and a left join of two tables end exact, and every update
they wrote is strictly newer than the one before it for its key (a duplicate fails it)."""

from __future__ import annotations

import random
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import orjson
import pytest

from baton.testing import read_all, wait_for
from tests.support.kills import feed_topics_while_killing, start_workers

pytestmark = pytest.mark.integration

TOPOLOGY = """
import os
from baton import JSON, STR, Topology

topology = Topology()
accounts = topology.table(os.environ["ACCOUNTS"], key=STR, value=JSON, store="accounts")
limits = topology.table(os.environ["LIMITS"], key=STR, value=JSON, store="limits")
(accounts.filter(lambda _k, a: a["region"] != "closed")
    .map_values(lambda a: {"where": a["region"], "cents": a["balance"]})
    .group_by(lambda _k, a: (a["where"], a["cents"]), key=STR, value=JSON, name="by-region")
    .aggregate(lambda: 0, lambda _k, b, total: total + b, lambda _k, b, total: total - b, store="totals")
    .to_stream()
    .to(os.environ["TOTALS"], value=JSON))
(accounts.left_join(limits, lambda a, l: {"a": a["version"], "l": l and l["version"], "limit": l and l["limit"]})
    .to_stream()
    .to(os.environ["JOINED"], value=JSON))
"""
ACCOUNTS, VERSIONS = 400, 6


def history(bootstrap: str, topic: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for r in read_all(bootstrap, topic):
        assert r.key is not None
        out.setdefault(r.key.decode(), []).append(None if r.value is None else orjson.loads(r.value))
    return out


def test_grouped_aggregation_and_table_join_stay_exact_under_kills(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    names = {
        x: new_topic(4, name=f"{unique_name}-{x.lower()}") for x in ("ACCOUNTS", "LIMITS", "TOTALS", "JOINED")
    }
    module = tmp_path / "tables.py"
    module.write_text(TOPOLOGY)
    rng = random.Random(5)
    region = {f"a{i}": rng.choice(["eu", "us", "apac", "closed"]) for i in range(ACCOUNTS)}
    accounts, balance = [], dict.fromkeys(region, 0)
    for version in range(1, VERSIONS + 1):  # balances only rise, regions stay: every total only rises
        for key, where in region.items():
            balance[key] += rng.randrange(1, 50)
            accounts.append((key, {"region": where, "balance": balance[key], "version": version}))
    limits = [(f"a{i}", {"limit": 10 * v, "version": v}) for v in range(1, 4) for i in range(0, ACCOUNTS, 2)]

    def encoded(rows: list[tuple[str, dict[str, Any]]]) -> list[tuple[bytes, bytes]]:
        return [(k.encode(), orjson.dumps(v)) for k, v in rows]

    workers = start_workers(
        str(module), bootstrap=kafka_bootstrap, app=unique_name, tmp_path=tmp_path, env=names
    )
    try:
        kills = feed_topics_while_killing(
            workers,
            bootstrap=kafka_bootstrap,
            feeds=[
                (names["LIMITS"], encoded(limits), 60),
                (names["ACCOUNTS"], encoded(accounts), 200),
            ],
            min_kills=2,
        )
        totals = {r: sum(b for k, b in balance.items() if region[k] == r) for r in ("eu", "us", "apac")}
        last_limit = {f"a{i}": 3 for i in range(0, ACCOUNTS, 2)}
        joined = {
            k: {"a": VERSIONS, "l": last_limit.get(k), "limit": last_limit.get(k) and 30} for k in region
        }
        seen: dict[str, str] = {}

        def exact(topic: str, expected: dict[str, Any], newer: Callable[[Any, Any], bool]) -> bool:
            updates = history(kafka_bootstrap, topic)
            latest = {k: v[-1] for k, v in updates.items()}
            wrong = [k for k in expected if latest.get(k) != expected[k]]
            seen[topic] = (
                f"{len(wrong)} keys not final, e.g. {[(k, latest.get(k), expected[k]) for k in wrong[:2]]}"
            )
            if wrong or set(latest) != set(expected):
                return False
            for key, values in updates.items():
                for before, after in pairwise(values):
                    assert newer(before, after), (key, values)
            return True

        def totals_exact() -> bool:
            return exact(names["TOTALS"], totals, lambda a, b: b > a)

        def joined_exact() -> bool:
            return exact(
                names["JOINED"],
                joined,
                lambda a, b: (
                    (a["a"], a["l"] or 0) != (b["a"], b["l"] or 0)
                    and b["a"] >= a["a"]
                    and (b["l"] or 0) >= (a["l"] or 0)
                ),
            )

        wait_for("the regional totals never matched", totals_exact, 120, every=2, detail=lambda: str(seen))
        wait_for("the joined table never matched", joined_exact, 120, every=2, detail=lambda: str(seen))
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
    assert kills >= 4
