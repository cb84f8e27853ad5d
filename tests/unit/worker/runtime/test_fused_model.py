"""Model check of the fused loop (``runtime/fused.py``) against the general path it stands in for.

Two tasks of the same topology, one with the fused loop and one without
(``fuse_aggregations=False``), get the same real ``confluent_kafka.Message`` records in runs
of any length, across two input topics or from a repartition topic (origin headers), with bad keys and values, tombstones, null keys,
timestamps the extractor refuses, an aggregator that deletes or raises, and a write cache
small enough to flush in the middle of a run; between runs, flushes, commits and aborts.
After every step they must agree on everything the runtime and the user can see:

* every record sent (changelog and sink, with keys, values, partitions and timestamps);
* every dead letter (stage, offset and the error's type and message);
* the persistent stores, what the stores answer for every key, and the positions to
  commit (also where each ``process_run`` call stopped);
* the record context left behind (a flush and a punctuator read it), and the origin of
  each output record (a blue-green sink gate decides on it).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Message
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule
from pydantic import BaseModel, ConfigDict

from baton import JSON, LONG, STR, Json, Topology
from baton.worker.naming import TaskId
from baton.worker.runtime.task import Task
from baton.worker.state.stores import MemoryStore
from baton.worker.state.task_store import CacheBudget, entry_size
from baton.worker.topology.context import ORIGIN_HEADER, Headers, encode_origin
from tests.support.tasks import EveryThirdHeldBack, Recorded, Sent, record_context

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
# a repartition topic's records name the input record they descend from (the origin); the
# general path reads it from any record, as the fused loop must
HEADERS: list[Headers | None] = [
    None,
    [(ORIGIN_HEADER, encode_origin("clicks", 3, 41))],
    [(ORIGIN_HEADER, encode_origin("more-clicks", 5, 7)), ("other", b"x")],
    [("other", b"y")],
]
VALUES = [
    b'{"n": 1}',
    b'{"n": 2}',
    b'{"n": 3, "op": "del"}',
    b'{"n": 1, "op": "boom"}',
    b'{"n": "1"}',  # strict: a string is not an int
    b"{bad",
    None,  # a tombstone: not folded
]


def _replay(raw: bytes | None) -> Any:
    return None if raw is None else bytearray(raw)


class FusedModel(RuleBasedStateMachine):
    @initialize(
        key=st.sampled_from(sorted(KEYS)),
        extract=st.booleans(),
        count=st.booleans(),
        repartition=st.booleans(),
        merge=st.booleans(),
    )
    def build(self, key: str, extract: bool, count: bool, repartition: bool, merge: bool) -> None:
        topology = Topology()
        serdes: dict[str, Any] = {
            "key": {"str": STR, "json": JSON, "long": LONG}[key],
            "value": Json(Op),
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
        self.sides: list[tuple[Task, Sent, Recorded, MemoryStore]] = []
        for fused in (True, False):
            sent, dead, persistent = Sent(), Recorded(), MemoryStore()
            task = Task(
                TaskId(0, 0),
                sub,
                application_id="app",
                stores={"s": persistent},
                send=sent,
                gate=EveryThirdHeldBack(),
                caching=True,
                dead_letter=dead,
                cache_budget=CacheBudget(2 * entry_size(b"a", 10) + 5),  # a third key flushes
                fuse_aggregations=fused,
            )
            self.sides.append((task, sent, dead, persistent))
        self.topics = self.sides[0][0].input_topics
        self.offsets = dict.fromkeys(self.topics, 0)
        assert all(
            self.sides[0][0]._sources[t].fused is not None and self.sides[1][0]._sources[t].fused is None
            for t in self.topics
        ), "the model compares the fused loop with the general path"
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
            offset = self.offsets[topic]
            self.offsets[topic] += 1
            messages.append(
                Message(
                    topic=topic,
                    partition=0,
                    offset=offset,
                    key=_replay(self.keys[key]) if replayed else self.keys[key],
                    value=_replay(VALUES[value]) if replayed else VALUES[value],
                    timestamp=(1, 1000 + offset),
                    headers=headers,
                )
            )
        start = min(start, len(messages) - 1)  # the loop may hand a task the middle of a batch
        stops = []
        for task, *_ in self.sides:
            i, seen = start, []
            while i < len(messages):
                i = task.process_run(messages, i, len(messages))
                seen.append(i)
            stops.append(seen)
        assert stops[0] == stops[1]

    @rule()
    def flush(self) -> None:
        for task, *_ in self.sides:
            task.flush()

    @rule()
    def commit(self) -> None:
        for task, *_ in self.sides:
            task.flush()
            task.committed_ok({("app-s-changelog", 0): 7})

    @rule()
    def abort(self) -> None:
        assert self.sides[0][0].rewind() == self.sides[1][0].rewind()

    @invariant()
    def both_paths_agree(self) -> None:
        (fused, f_sent, f_dead, f_store), (general, g_sent, g_dead, g_store) = self.sides
        assert f_sent == g_sent
        assert f_sent.timestamps == g_sent.timestamps
        assert f_dead == g_dead
        assert list(f_store.items()) == list(g_store.items())
        assert fused.positions == general.positions
        assert fused.processed_since_commit == general.processed_since_commit
        for raw in [b"a", b"b", b"c", b'"a"', b'"b"', b'{"x":1}']:
            assert fused.stores["s"].get(raw) == general.stores["s"].get(raw)
        assert record_context(fused.ctx) == record_context(general.ctx)


TestFusedModel = FusedModel.TestCase
TestFusedModel.settings = settings(max_examples=200, stateful_step_count=30, deadline=None)
