"""TopologyTestDriver: each kind of topology the integration tests run against a broker, run without one.

Mirrors tests/integration/test_engine_*.py (repartition, windows, tables, punctuators,
DLQ): the same shapes, on the worker's own tasks, in-process.
"""

from __future__ import annotations

from typing import Any

import pytest

from baton import JSON, LONG, STR, Processor, ProcessorContext, PunctuationType, Topology, tumbling
from baton.testing import TopologyTestDriver

pytestmark = pytest.mark.unit


def test_stateless_map_and_filter() -> None:
    topology = Topology()
    (
        topology.stream("in", key=STR, value=JSON)
        .filter(lambda _k, v: v["n"] > 1)
        .map(lambda k, v: (k.upper(), v["n"] * 10), value=LONG)
        .to("out")
    )
    with TopologyTestDriver(topology) as driver:
        source, sink = driver.input_topic("in"), driver.output_topic("out")
        for n in range(4):
            source.pipe("a", {"n": n}, timestamp=100 + n)
        records = sink.read_records()
        assert [(r.key, r.value, r.timestamp) for r in records] == [("A", 20, 102), ("A", 30, 103)]
        assert sink.is_empty()


def test_aggregation_emits_every_update_and_its_store_reads_by_key() -> None:
    topology = Topology()
    (
        topology.stream("in", key=STR, value=LONG)
        .group_by_key()
        .reduce(lambda a, b: a + b, store="sums")
        .to_stream()
        .to("out")
    )
    with TopologyTestDriver(topology) as driver:
        driver.input_topic("in").pipe_key_values([("a", 1), ("b", 5), ("a", 2)])
        assert driver.output_topic("out").read_key_values() == [("a", 1), ("b", 5), ("a", 3)]
        store = driver.key_value_store("sums")
        assert (store["a"], store.get("zz"), "b" in store, store.to_dict()) == (
            3,
            None,
            True,
            {"a": 3, "b": 5},
        )


@pytest.mark.parametrize("partitions", [1, 3])
def test_group_by_a_new_key_goes_through_the_repartition_topic(partitions: int) -> None:
    topology = Topology()
    (
        topology.stream("clicks", key=STR, value=JSON)
        .group_by(lambda _user, click: click["page"], key=STR)
        .count(store="per-page")
        .to_stream()
        .to("page-counts", value=LONG)
    )
    with TopologyTestDriver(topology, partitions=partitions) as driver:
        clicks = driver.input_topic("clicks")
        for user, page in [("alice", "/"), ("bob", "/"), ("carol", "/buy"), ("alice", "/")]:
            clicks.pipe(user, {"page": page})  # each processed to its count before pipe returns
        assert driver.output_topic("page-counts").read_key_values() == [
            ("/", 1),
            ("/", 2),
            ("/buy", 1),
            ("/", 3),
        ]
        assert driver.key_value_store("per-page").to_dict() == {"/": 3, "/buy": 1}
        assert any(t.endswith("-repartition") for t in driver.produced_topics())


def test_windowed_count_closes_windows_with_grace_by_stream_time_and_drops_late_records() -> None:
    topology = Topology()
    (
        topology.stream("in", key=STR, value=STR)
        .group_by_key()
        .windowed_by(tumbling(1000, grace=500))
        .count(store="per-second")
        .to_stream()
        .map(lambda w, n: (w.key, f"{w.start}:{n}"), key=STR)
        .to("out", value=STR)
    )
    with TopologyTestDriver(topology) as driver:
        source, out = driver.input_topic("in"), driver.output_topic("out")
        source.pipe("a", "x", timestamp=100)
        source.pipe("a", "x", timestamp=1200)
        source.pipe("a", "x", timestamp=900)  # out of order, within the grace: counted
        source.pipe("a", "x", timestamp=1600)  # stream time 1600: window 0 closed (1000 + 500)
        source.pipe("a", "x", timestamp=950)  # too late: dropped
        assert out.read_values() == ["0:1", "1000:1", "0:2", "1000:2"]
        assert driver.late_records == 1
        windows = driver.window_store("per-second").fetch("a")  # window 0 is past its retention
        assert [(w.start, w.end, n) for w, n in windows] == [(1000, 2000, 2)]  # (size + grace): gone
        assert driver.window_store("per-second").fetch("a", time_to=999) == []


def test_stream_table_join_sees_the_table_as_it_stands() -> None:
    topology = Topology()
    users = topology.table("users", key=STR, value=JSON, store="users")
    (
        topology.stream("orders", key=STR, value=JSON)
        .join(users, lambda order, user: {**order, "name": user["name"]})
        .to("named", value=JSON)
    )
    with TopologyTestDriver(topology) as driver:
        orders_in, users_in = driver.input_topic("orders"), driver.input_topic("users")
        out = driver.output_topic("named")
        orders_in.pipe("u1", {"id": 1})  # no user yet: an inner join drops it
        users_in.pipe("u1", {"name": "Ann"})
        orders_in.pipe("u1", {"id": 2})
        users_in.pipe("u1", None)  # deleted
        orders_in.pipe("u1", {"id": 3})
        assert out.read_values() == [{"id": 2, "name": "Ann"}]
        assert driver.key_value_store("users").to_dict() == {}


class _Heartbeat(Processor):
    """Counts records per key and writes the counts every 10 s of wall-clock time."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.counts = context.store("seen")
        context.schedule(10_000, PunctuationType.WALL_CLOCK, self.report)

    def process(self, key: Any, value: Any) -> None:
        self.counts.put(key, (self.counts.get(key) or 0) + 1)

    def report(self, now: int) -> None:
        self.context.forward("total", f"{now}:{self.counts.get('a')}")


def test_a_wall_clock_punctuator_fires_when_the_clock_is_advanced() -> None:
    topology = Topology()
    topology.store("seen", key=STR, value=LONG)
    topology.stream("in", key=STR, value=STR).process(_Heartbeat, stores=["seen"]).to("out", value=STR)
    with TopologyTestDriver(topology, wall_clock_ms=5_000) as driver:
        source, out = driver.input_topic("in"), driver.output_topic("out")
        source.pipe("a", "x")
        source.pipe("a", "x")
        driver.advance_wall_clock(4_000)  # 9 s: no multiple of 10 s crossed
        assert out.is_empty()
        driver.advance_wall_clock(1_000)
        assert out.read_key_values() == [("total", "10000:2")]
        assert driver.key_value_store("seen")["a"] == 2


def test_a_record_that_fails_to_deserialize_goes_to_the_dead_letters_and_processing_goes_on() -> None:
    topology = Topology()
    topology.stream("in", key=STR, value=LONG).map_values(lambda n: n + 1).to("out")
    with TopologyTestDriver(topology) as driver:
        source = driver.input_topic("in")
        source.pipe_raw(b"k", b"not eight bytes", timestamp=7)
        source.pipe("k", 1)
        assert driver.output_topic("out").read_key_values() == [("k", 2)]
        [dead] = driver.dead_letters()
        assert (dead.topic, dead.partition, dead.offset, dead.stage) == ("in", 0, 0, "deserialize")
        assert (dead.key, dead.value, dead.timestamp) == (b"k", b"not eight bytes", 7)
        assert dead.error.startswith("SerdeError")


def test_on_error_fail_raises_out_of_pipe() -> None:
    topology = Topology()
    topology.stream("in", key=STR, value=LONG).to("out")
    with (
        TopologyTestDriver(topology, on_error="fail") as driver,
        pytest.raises(Exception, match="deserialize"),
    ):
        driver.input_topic("in").pipe_raw(b"k", b"x")
