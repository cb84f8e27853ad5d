"""``split()``/``branch`` and ``merge()``: Kafka Streams' routing semantics, on the worker's own tasks."""

from __future__ import annotations

import pytest

from baton import JSON, LONG, STR, Branched, Stream, Topology, TopologyError
from baton.testing import TopologyTestDriver
from baton.worker.runtime.internal_topics import copartitioning_problem
from baton.worker.topology.splice import flip_refusal

pytestmark = pytest.mark.unit


def _split(topology: Topology) -> dict[str, Stream]:
    return (
        topology.stream("in", key=STR, value=LONG)
        .split(name="n-")
        .branch(lambda _k, v: v < 0, Branched.as_("negative"))
        .branch(lambda _k, v: v < 10)  # unnamed: "n-2"
        .branch(lambda _k, v: v < 100, Branched.with_function(lambda s: s.map_values(lambda v: v * 2)))
        .default_branch()
    )


def test_each_record_goes_to_the_first_branch_whose_predicate_holds() -> None:
    topology = Topology()
    branches = _split(topology)
    assert sorted(branches) == ["n-0", "n-2", "n-3", "n-negative"]
    for name, stream in branches.items():
        stream.to(f"out-{name}")
    with TopologyTestDriver(topology) as driver:
        driver.input_topic("in").pipe_key_values([("a", -1), ("b", 5), ("c", 50), ("d", 500), ("e", -7)])
        out = {name: driver.output_topic(f"out-{name}").read_key_values() for name in branches}
    assert out == {
        "n-negative": [("a", -1), ("e", -7)],
        "n-2": [("b", 5)],
        "n-3": [("c", 100)],  # with_function: the branch's result is what the map holds
        "n-0": [("d", 500)],
    }


def test_without_a_default_branch_unmatched_records_are_dropped() -> None:
    topology = Topology()
    seen: list[int] = []
    branches = (
        topology.stream("in", key=STR, value=LONG)
        .split()
        .branch(lambda _k, v: v > 0, Branched.with_consumer(lambda s: s.peek(lambda _k, v: seen.append(v))))
        .branch(lambda _k, v: v == 0, Branched.as_("zero"))
        .no_default_branch()
    )
    assert list(branches) == ["zero"]  # a consumer's branch is not in the result
    branches["zero"].to("zeros")
    with TopologyTestDriver(topology) as driver:
        driver.input_topic("in").pipe_key_values([("a", 1), ("b", 0), ("c", -1), ("d", 2)])
        assert driver.output_topic("zeros").read_key_values() == [("b", 0)]
    assert seen == [1, 2]


def test_branch_misuse_is_refused() -> None:
    topology = Topology()
    split = topology.stream("in").split()
    split.branch(lambda _k, _v: True, Branched.as_("x"))
    with pytest.raises(TopologyError, match="two branches"):
        split.branch(lambda _k, _v: True, Branched.as_("x"))
    split.no_default_branch()
    with pytest.raises(TopologyError, match="finished"):
        split.branch(lambda _k, _v: True)


def test_merge_puts_both_streams_in_one_sub_topology_and_aggregates_them() -> None:
    topology = Topology()
    a = topology.stream("a", key=STR, value=LONG)
    b = topology.stream("b", key=STR, value=LONG).map_values(lambda v: v * 100)
    a.merge(b).group_by_key().reduce(lambda x, y: x + y, store="sums").to_stream().to("out")
    built = topology.build()
    assert len(built.subtopologies) == 1 and built.subtopologies[0].source_topics == ["a", "b"]
    with TopologyTestDriver(topology, partitions=2) as driver:
        driver.input_topic("a").pipe_key_values([("k", 1), ("j", 2)])
        driver.input_topic("b").pipe_key_values([("k", 3)])
        driver.input_topic("a").pipe_key_values([("k", 4)])
        out = driver.output_topic("out").read_key_values()
        assert [v for k, v in out if k == "k"] == [1, 301, 305]
        assert driver.key_value_store("sums").to_dict() == {"k": 305, "j": 2}


def test_branches_merged_again_keep_every_record_once() -> None:
    topology = Topology()
    branches = (
        topology.stream("in", key=STR, value=JSON)
        .split()
        .branch(lambda _k, v: v["even"], Branched.as_("even"))
        .default_branch(Branched.as_("odd"))
    )
    evens = branches["even"].map_values(lambda v: {**v, "tag": "e"})
    evens.merge(branches["odd"]).to("out")
    with TopologyTestDriver(topology) as driver:
        driver.input_topic("in").pipe_key_values([(str(n), {"even": n % 2 == 0}) for n in range(4)])
        out = driver.output_topic("out").read_key_values()
    assert [k for k, _ in out] == ["0", "1", "2", "3"]
    assert [v.get("tag") for _, v in out] == ["e", None, "e", None]


def test_a_key_change_on_either_side_makes_a_later_grouping_repartition() -> None:
    topology = Topology()
    a = topology.stream("a", key=STR, value=LONG)
    b = topology.stream("b", key=STR, value=LONG).map(lambda k, v: (k + "!", v))
    a.merge(b).group_by_key().count().to_stream().to("out")
    assert len(topology.build().repartition_topics) == 1


def test_merged_then_aggregated_topics_must_be_co_partitioned() -> None:
    topology = Topology()
    a, b = topology.stream("a", key=STR), topology.stream("b", key=STR)
    a.merge(b).group_by_key().count()
    assert "co-partitioned" in copartitioning_problem(topology.build(), {"a": 2, "b": 3})
    assert "several topics (a, b)" in flip_refusal(topology.build())  # merged per poll: not exact
    stateless = Topology()
    stateless.stream("a").merge(stateless.stream("b")).to("out")
    assert copartitioning_problem(stateless.build(), {"a": 2, "b": 3}) == ""
    assert flip_refusal(stateless.build()) == ""  # each output depends on its own record only
