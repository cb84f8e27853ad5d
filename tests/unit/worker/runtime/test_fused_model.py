"""Model check of the fused loop (``runtime/fused.py``) against the general path it stands in for.

Two tasks of the same topology, one with the fused loop and one without
(``fuse_aggregations=False``), get the same real ``confluent_kafka.Message`` records in runs
of any length, across two input topics or from a repartition topic (with headers neither path may read), with bad keys and values, tombstones, null keys,
timestamps the extractor refuses, an aggregator that deletes or raises, and a write cache
small enough to flush in the middle of a run; between runs, flushes, commits and aborts.
After every step they must agree on everything the runtime and the user can see:

* every record sent (changelog and sink, with keys, values, partitions and timestamps);
* every dead letter (stage, offset and the error's type and message);
* the persistent stores, what the stores answer for every key, and the positions to
  commit (also where each ``process_run`` call stopped);
* the record context left behind (a flush and a punctuator read it), and the input
  position of each output record (a blue-green sink gate decides on it).
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule
from pydantic import BaseModel, ConfigDict

from baton import JSON, LONG, STR, Json, Topology
from baton.worker.runtime.fused import FusedAggregate
from baton.worker.topology.context import Headers
from tests.support.tasks import EveryThirdHeldBack, TwoPaths

pytestmark = pytest.mark.unit

TOPICS = ["clicks", "more-clicks"]


class Op(BaseModel):
    model_config = ConfigDict(strict=True)
    n: int
    op: str = "add"


def aggregator(_key: Any, value: Op, current: int) -> int | None:
    if value.op == "boom":
        raise ValueError(f"boom at {current}")
    return None if value.op == "del" else current + value.n


def extractor(_key: Any, value: Op, timestamp: int) -> int:
    return timestamp - value.n  # n past the record's timestamp: refused


KEYS = {
    "str": [b"a", b"b", b"c", b"\xff", None],  # invalid UTF-8, a null key
    "json": [b'"a"', b'"b"', b'{"x": 1}', b"{bad", None],  # a dict key, malformed JSON
    "long": [
        (1).to_bytes(8, "big"),
        (2).to_bytes(8, "big"),
        (3).to_bytes(8, "big"),
        b"\x01",
        None,
    ],  # a short one
}
# headers never change what either path does: the origin header that repartition records
# of earlier versions carry ("baton.origin") included
HEADERS: list[Headers | None] = [
    None,
    [("baton.origin", b"3:41:clicks")],
    [("baton.origin", b"5:7:more-clicks"), ("other", b"x")],
    [("other", b"y")],
]
VALUES = [
    b'{"n": 1}',
    b'{"n": 2}',
    b'{"n": 3, "op": "del"}',
    b'{"n": 1, "op": "boom"}',
    b'{"n": "1"}',  # strict: a string is not an int
    b'{"n": 2, "extra": true}',  # a name the model ignores
    b"[1]",  # no object: a count checks it without building an Op (``serdes.checking_deserializer``)
    b"{bad",
    None,  # a tombstone: not folded
]


class FusedModel(TwoPaths):
    values = VALUES

    @initialize(
        key=st.sampled_from(sorted(KEYS)),
        extract=st.booleans(),
        count=st.booleans(),
        repartition=st.booleans(),
        merge=st.booleans(),
    )
    def build(self, key: str, extract: bool, count: bool, repartition: bool, merge: bool) -> None:
        topology = Topology()
        # a count of Baton's own repartition topic of plain JSON takes every value as read
        # (``own_json``), "{bad" included, on both paths
        serdes: dict[str, Any] = {
            "key": {"str": STR, "json": JSON, "long": LONG}[key],
            "value": JSON if count and repartition else Json(Op),
            "timestamp": None if repartition else extractor if extract else None,
        }
        if merge:  # two streams merged: the aggregation is fused through the merge's pass-through
            stream = topology.stream(TOPICS[0], **serdes).merge(topology.stream(TOPICS[1:], **serdes))
        else:
            stream = topology.stream(TOPICS, **serdes)
        # group_by: the aggregation reads a repartition topic, whose records carry their origin
        grouped = stream.group_by(lambda k, _v: k, name="g") if repartition else stream.group_by_key()
        table = grouped.count(store="s") if count else grouped.aggregate(lambda: 0, aggregator, store="s")
        table.to_stream().to("out")
        sub = topology.build().subtopologies[1 if repartition else 0]
        self.keys = KEYS[key]
        self.setup(sub, gate=EveryThirdHeldBack(), budget_key=b"a", fast=FusedAggregate)
        assert self.sides[0][0].stores["s"].forward_serialized is not None

    @rule(
        records=st.lists(
            st.tuples(
                st.integers(0, 1),
                st.integers(0, 4),
                st.integers(0, len(VALUES) - 1),
                st.sampled_from(HEADERS),
            ),
            min_size=1,
            max_size=12,
        ),
        start=st.integers(0, 3),
        replayed=st.booleans(),
    )
    def process(
        self, records: list[tuple[int, int, int, Headers | None]], start: int, replayed: bool
    ) -> None:
        """``replayed``: keys and values as ``bytearray``, as the compactor's replay hands them in
        (the fused loop once used such a key as a store key: unhashable, so it dead-lettered a
        record the general path counted; found by tests/unit/worker/runtime/test_fast_path_models.py)."""
        messages = []
        for which, key, value, headers in records:
            topic = self.topics[which % len(self.topics)]
            timestamp = 1000 + self.offsets[topic]
            messages.append(self.message(topic, key, value, timestamp, headers, replayed=replayed))
        self.run(messages, start)

    def store_keys(self) -> list[bytes]:
        """What the store answers for these must agree too: the fused loop reads through its cache."""
        return [b"a", b"b", b"c", b'"a"', b'"b"', b'{"x":1}']


TestFusedModel = FusedModel.TestCase
TestFusedModel.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)
