"""Model checks of the fast paths (``tree.fast_path``) against the general path they stand in for.

``test_fused_model.py`` checks ``runtime/fused.py`` this way; these check the loops of
``runtime/fused_chain.py``: a line of stateless steps into a sink (an output topic, or a
repartition topic), a stream-table join (a tailed table written between
runs, a processed one, a filtered one), and an aggregation of keys or of time windows folded
in the write cache (from an input topic, or from a repartition topic, with headers that
neither path may read).
Each machine builds two tasks of one random topology, one with its fast path and one without
(``Task(fuse_aggregations=False)``), hands both the same real ``confluent_kafka.Message``
records in runs of any length (bad keys and values, tombstones, null keys, refused
timestamps, records late past the grace period, user functions that raise or return what the
serde refuses, keys and values as the compactor's replay hands them in: ``bytearray``), and
flushes, commits and aborts between runs, with a write cache small enough to flush in the
middle of a run, under a blue-green gate that reads each record's position or an open one. After every step
the two must agree on everything the runtime and the user can see: every record sent (topic,
key, value, partition, headers, timestamp; a repartition topic's JSON values as they decode,
``serdes.decodes_alike``), every dead letter (stage, offset, the error's type
and message), late records, where each ``process_run`` call stopped, the persistent stores
and what the stores answer, the positions, stream time and the record context left behind.

It found a replayed ``bytearray`` key used as a store key (unhashable: the record was
dead-lettered where the general path counted it). Each of these changes to the loop fails
it: a window closing one millisecond late, ``_advance`` skipped when due, a late record not
counted, a changed value sent as the record's own
bytes, a sink that ignores the gate, the C serializer's error words in a dead letter, an
inner join that keeps unmatched records, a table's stale rows kept after a write. A JSON
value that a ``map_values`` changed in place, forwarded into a repartition topic as the bytes
it arrived in, was found with ``--hypothesis-seed=1`` and not by every seed (a step of that
kind must be drawn with a repartition and JSON values);
``test_task.py::test_a_repartition_topic_gets_a_json_value_as_the_steps_left_it`` always
catches it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import initialize, invariant, rule

from baton import JSON, LONG, STR, Serde, Topology, hopping, tumbling, until_window_closes
from baton.worker.runtime.processors.windowed import TimeWindowAggregateProcessor
from baton.worker.runtime.task import Task
from baton.worker.state.stores import MemoryStore
from baton.worker.topology.context import Headers, OpenGate
from tests.support.tasks import EveryThirdHeldBack, Sent, TwoPaths

pytestmark = pytest.mark.unit

MODEL_SETTINGS = settings(max_examples=120, stateful_step_count=25, deadline=None)


# keys as their bytes: valid UTF-8, JSON, 8-byte longs, and ones some serdes refuse
KEYS: dict[str, list[bytes | None]] = {
    "str": [b"a", b"b", b"c", b"\xff", None],
    "json": [b'"a"', b'"b"', b"7", b"{bad", None],
    "long": [
        (1).to_bytes(8, "big"),
        (2).to_bytes(8, "big"),
        (-3).to_bytes(8, "big", signed=True),
        b"\x01",
        None,
    ],
}
KEY_SERDES: dict[str, Serde[Any]] = {"str": STR, "json": JSON, "long": LONG}
VALUES: list[bytes | None] = [
    b'{"n": 1}',
    b'{"n": 2, "op": "del"}',
    b'{"n": 3, "op": "boom"}',
    b'{"n": 4, "op": "odd"}',  # a step returns what the sink's serde refuses
    b'{"n": 5}',
    b"{bad",
    b"[1, 2]",  # JSON, but the steps' value["n"] raises TypeError
    b"null",  # JSON whose value is None: an aggregation skips it, as it skips a tombstone
    None,
]
# what a record's headers say never changes what either path does: the origin header that
# repartition records of earlier versions carry ("baton.origin") included
HEADERS: list[Headers | None] = [
    None,
    [("baton.origin", b"3:41:clicks")],
    [("baton.origin", b"5:7:more-clicks"), ("other", b"x")],
    [("other", b"y")],
]
RECORDS = st.lists(
    st.tuples(
        st.integers(0, 4),  # key
        st.integers(0, len(VALUES) - 1),  # value
        st.integers(0, 40),  # timestamp: windows of 10, grace 0 to 15; some records are late
        st.sampled_from(HEADERS),
    ),
    min_size=1,
    max_size=12,
)


def _n(value: Any) -> int:
    """The steps' reading of a value: ``value["n"]`` (a list or a str raises, as user code would)."""
    return int(value["n"])


# -- an aggregation (of keys, or of time windows) folded in the write cache -------------------


def aggregator(_key: Any, value: Any, current: int) -> int | None:
    op = value.get("op") if isinstance(value, dict) else None
    if op == "boom":
        raise ValueError(f"boom at {current}")
    return None if op == "del" else current + _n(value)


class AggregateModel(TwoPaths):
    """Steps into an aggregation of keys or of their time windows, folded in the write cache."""

    values = VALUES

    @initialize(
        key=st.sampled_from(sorted(KEYS)),
        windows=st.sampled_from(["tumbling", "hopping", "none"]),
        grace=st.sampled_from([0, 5, 15]),
        count=st.booleans(),
        repartition=st.booleans(),
        filtered=st.booleans(),
        final=st.booleans(),
        raw_sink=st.booleans(),
        gated=st.booleans(),
        extract=st.booleans(),
    )
    def build(  # noqa: PLR0917 - hypothesis's arguments
        self,
        key: str,
        windows: str,
        grace: int,
        count: bool,
        repartition: bool,
        filtered: bool,
        final: bool,
        raw_sink: bool,
        gated: bool,
        extract: bool,
    ) -> None:
        if windows == "none":  # a key-value aggregation takes this loop after a step (else fused.py's)
            repartition, filtered, final = False, True, False
        # a count of Baton's own repartition topic of JSON takes every value as read
        # (``own_json``), "{bad" included, and a JSON null as None, on both paths
        topology = Topology()
        serde = KEY_SERDES[key]
        timestamp = (
            (lambda _k, v, ts: ts - 30 if isinstance(v, dict) and v.get("n") == 5 else ts)
            if extract
            else None
        )
        stream = topology.stream(
            "clicks", key=serde, value=JSON, timestamp=None if repartition else timestamp
        )
        if filtered:
            stream = stream.filter(lambda _k, v: isinstance(v, dict) and v.get("n") != 1)
        grouped = (
            stream.group_by(lambda k, _v: k, key=serde, name="g") if repartition else stream.group_by_key()
        )
        if windows != "none":
            grouped = grouped.windowed_by(
                hopping(10, 5, grace=grace) if windows == "hopping" else tumbling(10, grace=grace)
            )
        table = grouped.count(store="w") if count else grouped.aggregate(lambda: 0, aggregator, store="w")
        if final:
            table = table.suppress(until_window_closes())
        if raw_sink:  # the store's bytes go to the sink at flush (TaskStore.forward_serialized)
            table.to_stream().to("out")
        elif windows == "none":
            table.to_stream().map(lambda k, n: (f"{k!r}!", n), key=STR).to("out")
        else:
            table.to_stream().map(lambda w, n: (f"{w.key!r}@{w.start}-{w.end}", n), key=STR).to("out")
        sub = topology.build().subtopologies[1 if repartition else 0]
        self.keys = KEYS[key]
        self.windowed = windows != "none"
        self.setup(sub, gate=EveryThirdHeldBack() if gated else OpenGate())

    @rule(records=RECORDS, start=st.integers(0, 3), replayed=st.booleans())
    def process(
        self, records: list[tuple[int, int, int, Headers | None]], start: int, replayed: bool
    ) -> None:
        self.feed(records, start, replayed=replayed)

    def store_keys(self) -> list[bytes]:
        out = []
        for raw in self.keys:
            if raw is not None:
                out += [raw + start.to_bytes(8, "big", signed=True) for start in range(-5, 45, 5)]
                out.append(raw)
        return out

    @invariant()
    def same_stream_time(self) -> None:
        if not self.windowed:
            return
        procs = []
        for task, *_ in self.sides:
            (proc,) = [p for p in _processors(task) if isinstance(p, TimeWindowAggregateProcessor)]
            procs.append(proc)
        assert (
            procs[0].stream_time == procs[1].stream_time or procs[0].index is None or procs[1].index is None
        )


def _processors(task: Task) -> list[Any]:
    """Every processor of a task's tree (from the processors its sources forward to)."""
    seen: list[Any] = []
    stack = [source.forward.__self__ for source in task._sources.values()]  # type: ignore[attr-defined]
    while stack:
        proc = stack.pop()
        if proc in seen:
            continue
        seen.append(proc)
        stack.extend(proc.children)
    return seen


TestAggregateModel = AggregateModel.TestCase
TestAggregateModel.settings = MODEL_SETTINGS


# -- a line of stateless steps into a sink: an output topic, or a repartition topic ------------


def _step(kind: str, text: bool) -> Callable[..., Any]:
    """A step's function by kind, for JSON values (dicts, read as ``value["n"]``, which raises on
    a list) or text (str values); some raise, some return what the sink's serde refuses."""
    if kind == "filter":
        return (lambda _k, v: "2" not in v) if text else (lambda _k, v: _n(v) % 4 != 0)
    if kind == "map_values":  # a value the sink's serde refuses: an int for text, a set for JSON
        if text:
            return lambda v: 5 if "4" in v else v.upper()
        return lambda v: {4} if _n(v) == 4 else {**v, "seen": True}
    if kind == "map_values_same":  # the value object itself: its bytes are the record's own
        return (lambda v: v if "3" not in v else v[:3]) if text else (lambda v: v if _n(v) != 3 else v["op"])
    if kind == "map_values_in_place":  # a dict changed in place and returned: the same object, other content
        return lambda v: v if text or not isinstance(v, dict) else _seen(v)
    if kind == "peek":
        return lambda _k, v: _raise(RuntimeError("peek saw 5")) if "5" in str(v) else None
    if kind == "map":  # a key the sink's serde refuses
        return lambda k, v: (object() if "4" in str(v) else f"{k}/{str(v)[:4]}", v)
    if kind == "select_key":  # the same, the value kept: the same records get an unencodable key,
        # so a map after it never formats one into a text key (its id() differs between the paths)
        return lambda k, v: object() if "4" in str(v) else f"{str(k)[:2]}:{str(v)[-3:]}"
    raise AssertionError(kind)


def _seen(value: dict[str, Any]) -> dict[str, Any]:
    value["seen"] = True
    return value


def _raise(exc: Exception) -> None:
    raise exc


STEPS = ["filter", "map_values", "map_values_same", "map_values_in_place", "peek", "map", "select_key"]


class SinkModel(TwoPaths):
    values = VALUES

    @initialize(
        key=st.sampled_from(sorted(KEYS)),
        value_serde=st.sampled_from(["json", "str"]),
        steps=st.lists(st.sampled_from(STEPS), max_size=4),
        repartition=st.booleans(),
        merge=st.booleans(),
        gated=st.booleans(),
    )
    def build(  # noqa: PLR0917 - hypothesis's arguments
        self, key: str, value_serde: str, steps: list[str], repartition: bool, merge: bool, gated: bool
    ) -> None:
        topology = Topology()
        serde = KEY_SERDES[key]
        value, text = (JSON, False) if value_serde == "json" else (STR, True)
        if merge:
            stream = topology.stream("clicks", key=serde, value=value).merge(
                topology.stream("more-clicks", key=serde, value=value)
            )
        else:
            stream = topology.stream(["clicks", "more-clicks"], key=serde, value=value)
        for kind in steps:
            if kind == "filter":
                stream = stream.filter(_step(kind, text))
            elif kind == "peek":
                stream = stream.peek(_step(kind, text))
            elif kind == "map":
                stream = stream.map(_step(kind, text), key=STR)
            elif kind == "select_key":
                stream = stream.select_key(_step(kind, text), key=STR)
            else:
                stream = stream.map_values(_step(kind, text))
        if repartition:  # the producing side of a group_by: a repartition sink
            stream.group_by(lambda k, v: k, name="by").count(store="c")
        else:
            stream.to("out")
        built = topology.build()
        self.keys = KEYS[key]
        self.json_repartition = repartition and not text
        self.setup(built.subtopologies[0], gate=EveryThirdHeldBack() if gated else OpenGate())

    def alike(self, sent: Sent) -> list[Any]:
        """A repartition topic's JSON values need only decode alike (``serdes.decodes_alike``):
        the fast path forwards the bytes a value arrived in, the general path orjson's own."""
        if not self.json_repartition:
            return list(sent)
        # a tombstone is not the bytes of a JSON null: a count over the topic takes those as read
        # and skips only b"null" itself (``own_json``), so a None value must go as a tombstone
        return [(t, k, None if v is None else (orjson.loads(v),), p, h) for t, k, v, p, h in sent]

    @rule(records=RECORDS, start=st.integers(0, 3), topic=st.integers(0, 1), replayed=st.booleans())
    def process(
        self, records: list[tuple[int, int, int, Headers | None]], start: int, topic: int, replayed: bool
    ) -> None:
        self.feed(records, start, topic, replayed=replayed)


TestSinkModel = SinkModel.TestCase
TestSinkModel.settings = MODEL_SETTINGS


# -- a stream-table join ------------------------------------------------------------------------

ROWS: list[bytes | None] = [b'{"plan": "pro"}', b'{"plan": "free"}', b"{bad", b"null", b'"x"', None]


def joiner(value: Any, row: Any) -> Any:
    """Raises on a list value (``{**[1, 2]}``) or a row that is not an object (``"x".get``)."""
    return {**value, "plan": None if row is None else row.get("plan")}


class JoinModel(TwoPaths):
    values = VALUES

    @initialize(
        key=st.sampled_from(sorted(KEYS)),
        left=st.booleans(),
        table=st.sampled_from(["tailed", "processed", "filtered"]),
        before=st.lists(st.sampled_from(["filter", "peek", "map_values_same"]), max_size=2),
        after=st.booleans(),
        rows=st.lists(st.integers(0, len(ROWS) - 1), min_size=4, max_size=4),
        gated=st.booleans(),
    )
    def build(  # noqa: PLR0917 - hypothesis's arguments
        self,
        key: str,
        left: bool,
        table: str,
        before: list[str],
        after: bool,
        rows: list[int],
        gated: bool,
    ) -> None:
        topology = Topology()
        serde = KEY_SERDES[key]
        users = topology.table("users", key=serde, value=JSON, store="users")
        if table == "processed":  # a table with consumers of its updates: the task stores it itself
            users.to_stream().to("users-out")
        joined_table = users.filter(lambda _k, row: row != {"plan": "free"}) if table == "filtered" else users
        stream = topology.stream("clicks", key=serde, value=JSON)
        for kind in before:
            stream = (
                stream.filter(_step(kind, False)) if kind == "filter" else stream.peek(_step(kind, False))
            )
        joined = (stream.left_join if left else stream.join)(joined_table, joiner)
        if after:
            joined = joined.map_values(lambda v: {**v, "after": 1})
        joined.to("out")
        self.keys = KEYS[key]
        self.tailed = table != "processed"
        initial = [(k, ROWS[r]) for k, r in zip(self.keys, rows, strict=False) if k is not None]

        def tables() -> dict[str, MemoryStore]:
            if not self.tailed:
                return {}
            store = MemoryStore()
            store.write(initial, None)
            return {"users": store}

        self.setup(
            topology.build().subtopologies[0],
            gate=EveryThirdHeldBack() if gated else OpenGate(),
            tables=tables,
            fused=["clicks"],
        )
        self.clicks = self.topics.index("clicks")
        if not self.tailed:  # the table's first rows come through the task, as its topic's records
            self.feed(
                [(self.keys.index(k), 0, 0, None) for k, _ in initial], 0, topic=self.topics.index("users")
            )

    @rule(records=RECORDS, start=st.integers(0, 3), replayed=st.booleans())
    def process(
        self, records: list[tuple[int, int, int, Headers | None]], start: int, replayed: bool
    ) -> None:
        self.feed(records, start, topic=self.clicks, replayed=replayed)

    @rule(key=st.integers(0, 3), row=st.integers(0, len(ROWS) - 1))
    def update_table(self, key: int, row: int) -> None:
        """A row changes: written by the restore thread (tailed), or a record of the table's topic."""
        raw = self.keys[key]
        if raw is None:
            return
        if self.tailed:
            for *_, stores in self.sides:
                stores["users"].write([(raw, ROWS[row])], None)
        else:  # the table topic's value: a row, or a tombstone
            tombstone = len(VALUES) - 1
            self.feed([(key, 0 if ROWS[row] is not None else tombstone, 0, None)], 0, topic=1 - self.clicks)


TestJoinModel = JoinModel.TestCase
TestJoinModel.settings = MODEL_SETTINGS
