"""Tables as first-class: operations on changes, grouped aggregations, table-table and
foreign-key joins, run in tasks without Kafka (internal topics carried by hand)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import orjson
import pytest

from baton import JSON, STR, Topology, TopologyError, within
from baton.worker.runtime.internal_topics import planned_topics
from baton.worker.runtime.task import Task
from baton.worker.state.stores import MemoryStore
from baton.worker.topology.changes import (
    SUBSCRIBE,
    Adjust,
    AdjustSerde,
    decode_response,
    decode_subscription,
    encode_response,
    encode_subscription,
    value_digest,
)
from baton.worker.topology.serdes import SerdeError
from tests.support.tasks import Msg, Sent, make_task

pytestmark = pytest.mark.unit


def j(value: Any) -> bytes:
    return orjson.dumps(value)


def sub_of(t: Topology, topic: str) -> int:
    return next(s.index for s in t.build().subtopologies if topic in s.source_topics)


class Feed:
    """Offsets per topic for one task, so records can be pushed in one at a time."""

    def __init__(self, task: Task) -> None:
        self.task, self.offsets = task, dict[str, int]()

    def __call__(self, topic: str, key: bytes | None, value: bytes | None) -> None:
        offset = self.offsets.get(topic, 10)  # past offset 1, which the test gate closes
        self.offsets[topic] = offset + 1
        self.task.process(Msg(topic, offset, key, value))


def carry(sent: Sent, topic: str, feed: Feed, start: int = 0) -> int:
    """Push what one task sent to ``topic`` into another; returns how far it got."""
    records = sent.to(topic)
    for key, value in records[start:]:
        feed(topic, key, value)
    return len(records)


def decoded(sent: Sent, topic: str) -> list[tuple[str, Any]]:
    return [(k.decode(), None if v is None else orjson.loads(v)) for k, v in sent.to(topic) if k]


def test_adjust_and_foreign_key_records_round_trip_and_refuse_garbage() -> None:
    serde = AdjustSerde(JSON)
    for adjust in (Adjust(1, 2), Adjust(None, {"a": 1}), Adjust("x", None), Adjust(None, None)):
        assert serde.deserialize(serde.serialize(adjust)) == adjust
    with pytest.raises(SerdeError):
        serde.deserialize(b"\x00\x00")
    with pytest.raises(SerdeError):
        serde.deserialize(b"\x00\x00\x00\x05ab")
    digest = value_digest(b"left")
    assert decode_subscription(encode_subscription(SUBSCRIBE, digest, b"k1")) == (SUBSCRIBE, digest, b"k1")
    assert decode_response(encode_response(digest, b"v")) == (digest, b"v")
    assert decode_response(encode_response(digest, None)) == (digest, None)
    with pytest.raises(SerdeError):
        decode_subscription(b"x" + digest)
    with pytest.raises(SerdeError):
        decode_response(digest)


@pytest.mark.parametrize("caching", [False, True])
def test_filter_and_map_values_follow_rows_in_and_out(caching: bool) -> None:
    t = Topology()
    (
        t.table("users", key=STR, value=JSON)
        .filter(lambda _k, v: v["age"] >= 18)
        .map_values(lambda v: v["name"].upper(), value=STR)
        .to_stream()
        .to("adults", value=STR)
    )
    task, sent, _dead, _stores = make_task(t, caching)
    feed = Feed(task)
    feed("users", b"u1", j({"name": "ann", "age": 20}))
    feed("users", b"u2", j({"name": "bob", "age": 12}))  # never matched: nothing downstream
    feed("users", b"u1", j({"name": "ann", "age": 21}))
    feed("users", b"u2", j({"name": "bob", "age": 18}))
    feed("users", b"u1", j({"name": "ann", "age": 17}))  # stops matching: deleted downstream
    feed("users", b"u3", None)  # deleting an absent row: nothing
    feed("users", b"u2", None)
    assert sent.to("adults") == [
        (b"u1", b"ANN"),
        (b"u1", b"ANN"),
        (b"u2", b"BOB"),
        (b"u1", None),
        (b"u2", None),
    ]
    task.flush()
    changelog = dict(sent.to("app-table-store-0001-changelog"))  # the processed table logs its rows
    assert (
        orjson.loads(changelog[b"u1"] or b"null") == {"name": "ann", "age": 17} and changelog[b"u2"] is None
    )


def test_a_tailed_table_stays_tailed_and_a_table_with_operations_is_processed() -> None:
    t = Topology()
    users = t.table("users", key=STR, value=JSON)
    t.stream("clicks", key=STR, value=JSON).join(users, lambda c, u: u).to("out")
    sub = t.build().subtopologies[0]
    assert sub.source_topics == ["clicks"] and [x.store.source_topic for x in sub.tables] == ["users"]
    users.to_stream().to("users-copy")
    sub = t.build().subtopologies[0]
    assert sorted(sub.source_topics) == ["clicks", "users"] and sub.tables == []
    assert [s.name for s in sub.stores] == ["table-store-0001"] and sub.stores[0].source_topic is None


@pytest.mark.parametrize("caching", [False, True])
def test_grouped_table_moves_values_between_groups_and_keeps_a_staying_row_in_one_record(
    caching: bool,
) -> None:
    t = Topology()
    (
        t.table("accounts", key=STR, value=JSON)
        .group_by(lambda _k, v: (v["region"], v["balance"]), key=STR, value=JSON, name="by-region")
        .aggregate(lambda: 0, lambda _k, v, total: total + v, lambda _k, v, total: total - v, store="totals")
        .to_stream()
        .to("region-totals", value=JSON)
    )
    first, sent, _, _ = make_task(t, caching, sub=sub_of(t, "accounts"))
    second, out, _, _stores = make_task(t, caching, sub=sub_of(t, "by-region-repartition"))
    feed, regroup = Feed(first), Feed(second)
    feed("accounts", b"a1", j({"region": "eu", "balance": 10}))
    feed("accounts", b"a2", j({"region": "eu", "balance": 5}))
    feed("accounts", b"a1", j({"region": "eu", "balance": 12}))  # stays in eu: one record
    feed("accounts", b"a2", j({"region": "us", "balance": 5}))  # moves: out of eu, into us
    feed("accounts", b"a1", None)  # deleted: out of eu
    topic = "app-by-region-repartition"
    serde = AdjustSerde(JSON)
    assert [(k, serde.deserialize(v or b"")) for k, v in sent.to(topic)] == [
        (b"eu", Adjust(None, 10)),
        (b"eu", Adjust(None, 5)),
        (b"eu", Adjust(10, 12)),
        (b"eu", Adjust(5, None)),
        (b"us", Adjust(None, 5)),
        (b"eu", Adjust(12, None)),
    ]
    carry(sent, topic, regroup)
    second.flush()
    totals = decoded(out, "region-totals")
    assert dict(totals) == {"eu": 0, "us": 5}
    if not caching:
        assert [v for k, v in totals if k == "eu"] == [10, 15, 17, 12, 0]


def test_grouped_count_and_reduce() -> None:
    t = Topology()
    grouped = t.table("pets", key=STR, value=JSON).group_by(lambda _k, v: (v["kind"], v["legs"]), key=STR)
    grouped.count(store="n").to_stream().to("counts", value=JSON)
    grouped.reduce(lambda a, b: a + b, lambda a, b: a - b, store="legs").to_stream().to("legs", value=JSON)
    first, sent, _, _ = make_task(t, False, sub=0)
    second, out, _, _ = make_task(t, False, sub=1)
    feed = Feed(first)
    for key, kind, legs in (("p1", "dog", 4), ("p2", "dog", 3), ("p3", "bird", 2), ("p2", "bird", 2)):
        feed("pets", key.encode(), j({"kind": kind, "legs": legs}))
    carry(sent, f"app-{t.build().repartition_topics[0]}", Feed(second))
    assert dict(decoded(out, "counts")) == {"dog": 1, "bird": 2}
    assert dict(decoded(out, "legs")) == {"dog": 4, "bird": 4}


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("inner", [("k1", "a+B"), ("k1", "A+B"), ("k1", None)]),
        ("left", [("k1", "a+None"), ("k2", "x+None"), ("k1", "a+B"), ("k1", "A+B"), ("k1", "A+None")]),
        (
            "outer",
            [
                ("k1", "a+None"),
                ("k2", "x+None"),
                ("k1", "a+B"),
                ("k1", "A+B"),
                ("k1", "A+None"),
                ("k3", "None+C"),
                ("k3", None),
            ],
        ),
    ],
)
def test_table_table_joins_follow_both_sides(how: str, expected: list[tuple[str, Any]]) -> None:
    t = Topology()
    left = t.table("left", key=STR, value=STR)
    right = t.table("right", key=STR, value=STR)
    joiner = lambda a, b: f"{a}+{b}"  # noqa: E731
    joined = {
        "inner": lambda: left.join(right, joiner),
        "left": lambda: left.left_join(right, joiner),
        "outer": lambda: left.outer_join(right, joiner),
    }[how]()
    joined.to_stream().to("out", value=STR)
    task, sent, _, _ = make_task(t, True)
    feed = Feed(task)
    feed("left", b"k1", b"a")
    feed("left", b"k2", b"x")
    feed("right", b"k1", b"B")
    feed("left", b"k1", b"A")
    feed("right", b"k1", None)
    feed("right", b"k3", b"C")
    feed("right", b"k3", None)
    assert [(k.decode(), v and v.decode()) for k, v in sent.to("out") if k] == expected


def test_a_stream_joins_a_filtered_table_through_its_value_getter() -> None:
    t = Topology()
    vip = t.table("users", key=STR, value=JSON).filter(lambda _k, v: v["vip"])
    t.stream("clicks", key=STR, value=JSON).join(vip, lambda c, u: {"c": c, "u": u["name"]}).to("out")
    task, sent, _, _ = make_task(t, True)
    feed = Feed(task)
    feed("users", b"u1", j({"name": "ann", "vip": True}))
    feed("users", b"u2", j({"name": "bob", "vip": False}))
    feed("clicks", b"u1", j(1))
    feed("clicks", b"u2", j(2))
    assert decoded(sent, "out") == [("u1", {"c": 1, "u": "ann"})]


def fk_topology() -> Topology:
    t = Topology()
    orders = t.table("orders", key=STR, value=JSON)
    products = t.table("products", key=STR, value=JSON)
    (
        orders.left_join(
            products,
            lambda o, p: {"order": o["n"], "product": p and p["name"]},
            foreign_key=lambda o: o["product"],
            name="enrich",
        )
        .to_stream()
        .to("enriched", value=JSON)
    )
    return t


def test_foreign_key_join_follows_both_sides_and_drops_stale_answers() -> None:
    t = fk_topology()
    left, left_sent, _, _ = make_task(t, True, sub=sub_of(t, "orders"))
    right, right_sent, _, _ = make_task(t, True, sub=sub_of(t, "products"))
    lfeed, rfeed = Feed(left), Feed(right)
    subs, resps = "app-enrich-subscription-repartition", "app-enrich-response-repartition"
    carried = {subs: 0, resps: 0}

    def exchange() -> None:
        carried[subs] = carry(left_sent, subs, rfeed, carried[subs])
        carried[resps] = carry(right_sent, resps, lfeed, carried[resps])

    lfeed("orders", b"o1", j({"n": 1, "product": "p1"}))  # no product yet: left join, product None
    exchange()
    rfeed("products", b"p1", j({"name": "pen"}))  # the subscriber hears of it
    exchange()
    lfeed("orders", b"o2", j({"n": 2, "product": "p1"}))
    exchange()
    lfeed("orders", b"o1", j({"n": 3, "product": "p2"}))  # moves: unsubscribes from p1
    lfeed("orders", b"o1", j({"n": 4, "product": "p1"}))  # and back, before any answer came
    exchange()  # p2's answer (for n=3) is stale by now: dropped
    rfeed("products", b"p1", j({"name": "ink pen"}))
    exchange()
    lfeed("orders", b"o2", None)  # deleted: a tombstone at once
    exchange()
    results = decoded(left_sent, "enriched")  # per order, in order (orders interleave by right key)
    assert [v for k, v in results if k == "o1"] == [
        {"order": 1, "product": None},
        {"order": 1, "product": "pen"},
        {"order": 4, "product": "pen"},
        {"order": 4, "product": "ink pen"},
    ]
    assert [v for k, v in results if k == "o2"] == [
        {"order": 2, "product": "pen"},
        {"order": 2, "product": "ink pen"},
        None,
    ]
    ops = [decode_subscription(v or b"")[0] for _k, v in left_sent.to(subs)]
    assert ops.count(b"u") == 3  # p1 (moved to p2), p2 (moved back), p1 (o2 deleted)


def test_inner_foreign_key_join_deletes_results_whose_right_row_went() -> None:
    t = Topology()
    orders = t.table("orders", key=STR, value=JSON)
    products = t.table("products", key=STR, value=JSON)
    orders.join(
        products, lambda o, p: p["name"], foreign_key=lambda o: o["product"], name="fk"
    ).to_stream().to("out", value=JSON)
    left, lsent, _, _ = make_task(t, False, sub=sub_of(t, "orders"))
    right, rsent, _, _ = make_task(t, False, sub=sub_of(t, "products"))
    lfeed, rfeed = Feed(left), Feed(right)
    rfeed("products", b"p1", j({"name": "pen"}))
    lfeed("orders", b"o1", j({"product": "p1"}))
    lfeed("orders", b"o9", j({"product": None}))  # no foreign key: an inner join has nothing
    carry(lsent, "app-fk-subscription-repartition", rfeed)
    rfeed("products", b"p1", None)
    carry(rsent, "app-fk-response-repartition", lfeed)
    assert decoded(lsent, "out") == [("o1", "pen"), ("o1", None)]


def test_foreign_key_topics_are_sized_like_the_tables_they_meet() -> None:
    t = fk_topology()
    built = t.build()
    topics = {
        x.topic: x.num_partitions for x in planned_topics(built, "app", {"orders": 6, "products": 3}, 1)
    }
    assert topics["app-enrich-subscription-repartition"] == 3
    assert topics["app-enrich-response-repartition"] == 6
    assert topics["app-enrich-result-changelog"] == 6 and topics["app-enrich-subscriptions-changelog"] == 3


@pytest.mark.parametrize("caching", [False, True])
def test_an_aggregation_feeds_table_operations_and_to_stream_readers_alike(caching: bool) -> None:
    t = Topology()
    counts = t.stream("clicks", key=STR, value=JSON).group_by_key().count(store="counts")
    counts.to_stream().to("all", value=JSON)
    counts.filter(lambda _k, n: n >= 2).to_stream().to("busy", value=JSON)
    task, sent, _, _ = make_task(t, caching)
    feed = Feed(task)
    for key in (b"a", b"b", b"a", b"a"):
        feed("clicks", key, j(1))
        task.flush()
    assert decoded(sent, "all") == [("a", 1), ("b", 1), ("a", 2), ("a", 3)]
    assert decoded(sent, "busy") == [("a", 2), ("a", 3)]


def test_table_operations_refuse_what_they_cannot_do() -> None:
    t = Topology()
    windowed = t.stream("a").group_by_key().windowed_by(__import__("baton").tumbling(1000)).count()
    with pytest.raises(TopologyError, match="windowed table"):
        windowed.filter(lambda k, v: True)
    final = t.stream("b").group_by_key().windowed_by(__import__("baton").tumbling(1000)).count()
    final = final.suppress(__import__("baton").until_window_closes())
    with pytest.raises(TopologyError, match="after suppress"):
        final.map_values(str)


def test_a_stream_joins_a_global_table_on_a_key_of_its_choosing() -> None:
    t = Topology()
    products = t.global_table("products", key=STR, value=JSON, store="products")
    orders = t.stream("orders", key=STR, value=JSON)
    orders.join(products, lambda o, p: {"o": o["n"], "p": p["name"]}, key=lambda _k, o: o.get("product")).to(
        "out"
    )
    orders.left_join(products, lambda o, p: p and p["name"], key=lambda _k, o: o.get("product")).to("left")
    built = t.build()
    assert [g.store.source_topic for g in built.global_tables] == ["products"]
    assert built.subtopologies[0].source_topics == ["orders"] and built.subtopologies[0].stores == []
    assert "global table" in __import__("baton.worker.topology.splice", fromlist=["x"]).flip_refusal(built)
    table = MemoryStore()
    table.write([(b"p1", j({"name": "pen"}))], None)
    task, sent, _, _ = make_task(t, True, global_stores={"products": table})
    feed = Feed(task)
    feed("orders", b"o1", j({"n": 1, "product": "p1"}))
    feed("orders", b"o2", j({"n": 2, "product": "p9"}))  # not in the table
    feed("orders", b"o3", j({"n": 3}))  # no lookup key: the left join keeps it
    assert decoded(sent, "out") == [("o1", {"o": 1, "p": "pen"})]
    assert decoded(sent, "left") == [("o1", "pen"), ("o2", None), ("o3", None)]


def test_global_tables_must_be_joined_and_key_is_only_for_them() -> None:
    t = Topology()
    t.global_table("g")
    t.stream("a").to("b")
    with pytest.raises(TopologyError, match="never joined"):
        t.build()
    t2 = Topology()
    users = t2.table("users")
    with pytest.raises(TopologyError, match="key= picks the lookup key of a global table"):
        t2.stream("a").join(users, lambda a, b: a, key=lambda k, v: v)


def test_a_streams_outer_join_takes_a_stream() -> None:
    """The one join dispatch of a stream says so, rather than failing on a table's missing attribute."""
    t = Topology()
    users = t.table("users")
    with pytest.raises(TopologyError, match="outer_join\\(\\) takes a stream"):
        t.stream("a").outer_join(users, lambda a, b: a, windows=within(timedelta(seconds=1)))  # type: ignore[arg-type]
