"""The shipped examples on the test driver: no broker, the worker's own tasks, milliseconds.

The expectations are those the integration tests hold the real worker to for the same
input (tests/integration/test_engine_click_counter.py, test_engine_windows_final.py,
test_engine_enrichment.py): a count per click, one record per closed session, enrichment
as the table stands when the record is processed.
"""

from __future__ import annotations

from typing import Any

import pytest
from batondev.paths import REPO

from baton.testing import TopologyTestDriver

pytestmark = pytest.mark.unit

EXAMPLES = REPO / "examples"
MINUTE = 60_000


def test_click_counter_counts_every_click_and_dead_letters_bad_ones() -> None:
    with TopologyTestDriver(EXAMPLES / "click_counter.py") as driver:
        clicks, counts = driver.input_topic("clicks"), driver.output_topic("user_counts")
        for n, user in enumerate(["alice", "bob", "alice"]):
            clicks.pipe(user, {"user_id": user, "timestamp": n}, timestamp=1000 + n)
        clicks.pipe("alice", {"user_id": "alice", "timestamp": "soon"})  # strict model: bad input
        assert counts.read_key_values() == [("alice", 1), ("bob", 1), ("alice", 2)]
        assert driver.key_value_store("user-counts-store").to_dict() == {"alice": 2, "bob": 1}
        [dead] = driver.dead_letters()
        assert (dead.topic, dead.offset, dead.stage) == ("clicks", 3, "deserialize")


def test_click_counter_with_the_cache_emits_once_per_commit() -> None:
    with TopologyTestDriver(EXAMPLES / "click_counter.py", caching=True, commit_interval_ms=1000) as driver:
        clicks, counts = driver.input_topic("clicks"), driver.output_topic("user_counts")
        for n in range(5):
            clicks.pipe("alice", {"user_id": "alice", "timestamp": n}, timestamp=n)
        assert counts.is_empty()
        assert driver.key_value_store("user-counts-store")["alice"] == 5  # the cache is read too
        driver.advance_wall_clock(1000)
        assert counts.read_key_values() == [("alice", 5)]


def _view(user: str, page: str, ts: int) -> dict[str, Any]:
    return {"user_id": user, "page": page, "timestamp": ts}


def test_page_views_writes_each_session_once_when_it_closes() -> None:
    gap, grace = 30 * MINUTE, 5 * MINUTE  # the example's defaults
    with TopologyTestDriver(EXAMPLES / "page_views.py") as driver:
        views, sessions = driver.input_topic("page-views"), driver.output_topic("page-view-sessions")
        views.pipe("alice", _view("alice", "/", 0))
        views.pipe("alice", _view("alice", "/buy", 10 * MINUTE))
        views.pipe("bob", _view("bob", "/", 20 * MINUTE))
        views.pipe("alice", _view("alice", "/", 41 * MINUTE))  # past the gap: a new session
        assert sessions.is_empty()  # nothing closed yet: stream time is the view's time
        views.pipe("bob", _view("bob", "/", 10 * MINUTE + gap + grace + 1))  # closes alice's first
        assert sessions.read_key_values() == [
            (
                "alice",
                {"user_id": "alice", "start": 0, "end": 10 * MINUTE, "views": 2, "pages": ["/", "/buy"]},
            )
        ]
        views.pipe("alice", _view("alice", "/late", 5 * MINUTE))  # its session closed: dropped
        assert driver.late_records == 1
        windows = driver.window_store("sessions").fetch("alice")
        assert [(w.start, w.end, v["views"]) for w, v in windows] == [(41 * MINUTE, 41 * MINUTE, 1)]


def test_enrichment_joins_clicks_with_users_and_orders_with_products() -> None:
    with TopologyTestDriver(EXAMPLES / "enrichment.py") as driver:
        users, clicks = driver.input_topic("users"), driver.input_topic("clicks")
        enriched = driver.output_topic("clicks-enriched")
        clicks.pipe("alice", {"page": "/"})  # before the profile: a left join keeps it
        users.pipe("alice", {"country": "NL", "plan": "pro"})
        clicks.pipe("alice", {"page": "/buy"})
        assert enriched.read_values() == [
            {"page": "/", "country": None, "plan": None},
            {"page": "/buy", "country": "NL", "plan": "pro"},
        ]
        products, orders = driver.input_topic("products"), driver.input_topic("orders")
        out = driver.output_topic("orders-enriched")
        products.pipe("p1", {"name": "pen", "price_cents": 150, "version": 1})
        orders.pipe("o1", {"product_id": "p1", "quantity": 2})
        products.pipe("p1", {"name": "pen", "price_cents": 200, "version": 2})  # re-prices o1
        orders.pipe("o1", None)  # deleted: a tombstone
        got = out.read_key_values()
        assert [(k, v and v["total_cents"]) for k, v in got] == [("o1", 300), ("o1", 400), ("o1", None)]
