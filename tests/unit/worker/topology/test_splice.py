"""Which topologies refuse flips (issue 16, hole 5): the reason a user sees in the status."""

from __future__ import annotations

import pytest

from baton import STR, Topology
from baton.worker.topology.splice import flip_refusal

pytestmark = pytest.mark.unit


def test_stateless_steps_and_single_topic_aggregations_flip_exactly() -> None:
    t = Topology()
    t.stream(["a", "b"], key=STR, value=STR).filter(lambda _k, v: bool(v)).map_values(str.upper).to("out")
    t.stream("clicks", key=STR, value=STR).group_by_key().count(store="counts").to_stream().to("counts")
    assert flip_refusal(t.build()) == ""


def test_an_aggregation_over_several_topics_refuses_naming_them() -> None:
    t = Topology()
    t.stream(["clicks", "views"], key=STR, value=STR).group_by_key().count(store="c").to_stream().to("out")
    reason = flip_refusal(t.build())
    assert "aggregates records of several topics (clicks, views)" in reason
    assert "what each poll fetched" in reason


def test_a_stream_table_join_refuses_naming_the_table() -> None:
    t = Topology()
    users = t.table("users", key=STR, value=STR)
    t.stream("clicks", key=STR, value=STR).join(users, lambda c, u: f"{c}:{u}").to("out")
    reason = flip_refusal(t.build())
    assert "joins a stream with a table (users)" in reason


def test_a_repartition_refuses() -> None:
    t = Topology()
    t.stream("clicks", key=STR, value=STR).group_by(lambda _k, v: v).count(store="c").to_stream().to("out")
    assert "repartitions" in flip_refusal(t.build())
