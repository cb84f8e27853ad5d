"""The DSL builds the graph Kafka Streams would: sub-topologies, repartitions, stores."""

from __future__ import annotations

import pytest

from baton import JSON, STR, Topology, TopologyError, sessions, tumbling
from baton.worker.topology.graph import AggregateNode, SinkNode
from baton.worker.topology.windows import SessionWindowedSerde, TimeWindows, WindowedSerde

pytestmark = pytest.mark.unit


def test_click_counter_is_one_subtopology_with_one_store() -> None:
    from examples.click_counter import topology

    built = topology.build()
    assert len(built.subtopologies) == 1
    sub = built.subtopologies[0]
    assert sub.source_topics == ["clicks"]
    assert [s.name for s in sub.stores] == ["user-counts-store"]
    assert built.repartition_topics == []
    assert "Aggregate" in built.describe() and "Sink" in built.describe()


def test_group_by_goes_through_a_repartition_topic() -> None:
    t = Topology()
    t.stream("orders", key=STR, value=JSON).group_by(lambda _k, v: v["customer"], name="by-customer").count()
    built = t.build()
    assert built.repartition_topics == ["by-customer-repartition"]
    assert len(built.subtopologies) == 2
    first, second = built.subtopologies
    assert first.stores == [] and first.source_topics == ["orders"]
    assert second.sources[0].internal and second.source_topics == ["by-customer-repartition"]
    assert len(second.stores) == 1


def test_group_by_key_repartitions_only_after_a_key_change() -> None:
    t = Topology()
    s = t.stream("a", key=STR, value=JSON)
    s.map_values(lambda v: v).filter(lambda k, v: True).group_by_key().count(store="no-repartition")
    assert t.build().repartition_topics == []
    t2 = Topology()
    t2.stream("a", key=STR, value=JSON).map(lambda k, v: (v, k)).group_by_key().count()
    assert len(t2.build().repartition_topics) == 1


def test_windowed_aggregation_uses_a_windowed_key_serde() -> None:
    t = Topology()
    table = t.stream("a", key=STR).group_by_key().windowed_by(tumbling(1000)).count(store="w")
    node = table._node
    assert isinstance(node, AggregateNode)
    assert isinstance(node.store.key_serde, WindowedSerde)
    assert isinstance(node.windows, TimeWindows) and node.windows.size_ms == 1000
    sessions_table = t.stream("b", key=STR).group_by_key().windowed_by(sessions(500)).count(store="s")
    assert isinstance(sessions_table._node, AggregateNode)
    assert isinstance(sessions_table._node.store.key_serde, SessionWindowedSerde)


def test_join_pulls_the_table_into_the_stream_subtopology() -> None:
    t = Topology()
    users = t.table("users", key=STR, value=JSON, store="users")
    t.stream("clicks", key=STR, value=JSON).join(users, lambda c, u: {**c, **u}).to("enriched")
    built = t.build()
    assert len(built.subtopologies) == 1
    assert [tb.store.name for tb in built.subtopologies[0].tables] == ["users"]
    assert built.subtopologies[0].tables[0].store.source_topic == "users"


def test_to_uses_the_stream_serdes_unless_overridden() -> None:
    t = Topology()
    s = t.stream("in", key=STR, value=JSON)
    s.to("out")
    s.to("out2", value=STR)
    sinks = [c for c in s._node.children if isinstance(c, SinkNode)]
    assert [(x.topic, x.key_serde, x.value_serde) for x in sinks] == [("out", STR, JSON), ("out2", STR, STR)]


def test_invalid_topologies_are_refused_with_a_reason() -> None:
    with pytest.raises(TopologyError, match="reads no topic"):
        Topology().build()
    t = Topology()
    t.stream("a").group_by_key().count(store="x")
    with pytest.raises(TopologyError, match="two stores"):
        t.stream("b").group_by_key().count(store="x")
    t2 = Topology()
    t2.table("users")
    t2.stream("a")
    with pytest.raises(TopologyError, match="never used"):
        t2.build()
    t3 = Topology()
    users = t3.table("users")
    with pytest.raises(TopologyError, match="key may have changed"):
        t3.stream("a").map(lambda k, v: (v, k)).join(users, lambda a, b: a)
    with pytest.raises(TopologyError, match="a table joins another table"):
        users.join(t3.stream("b"), lambda a, b: a)  # type: ignore[arg-type]
