"""The runtime form of a sub-topology: a tree of processors, one tree per task.

A record is pushed through the whole tree (``process`` calls ``forward`` calls the
children's ``process``) before the next record is read: record-at-a-time, depth first,
as in Kafka Streams. Processors hold no Kafka client; sinks and stores write through
the ``Send`` function the runtime gives the task.

``forward`` is bound once the children are known (``connect``): the child's own
``process`` when there is one child (most nodes), a fan-out only for branches. That
saves a Python call per record and hop, which profiles of the click counter showed to be
a large part of the framework's per-record cost.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from baton.worker.runtime.punctuation import NO_TIME, Punctuations, Schedule
from baton.worker.runtime.window_index import WindowIndex
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import MISSING, TaskStore
from baton.worker.topology.context import (
    ORIGIN_HEADER,
    OpenGate,
    RecordContext,
    Send,
    SinkGate,
    encode_origin,
)
from baton.worker.topology.custom import PunctuationType
from baton.worker.topology.graph import (
    AggregateNode,
    CustomNode,
    GlobalJoinNode,
    JoinNode,
    StreamJoinNode,
    StreamJoinSideNode,
)
from baton.worker.topology.serdes import Serde, same_bytes
from baton.worker.topology.windows import SessionWindows, SlidingWindows, TimeWindows, Windowed


def drop(_key: Any, _value: Any) -> None:
    """``forward`` of a processor without children (a terminal node): nothing downstream."""


class Processor:
    __slots__ = ("children", "forward")

    def __init__(self) -> None:
        self.children: list[Processor] = []
        self.forward: Callable[[Any, Any], None] = drop

    def connect(self, children: list[Processor]) -> None:
        """Set the children and bind ``forward`` to them."""
        self.children = children
        if len(children) == 1:
            self.forward = children[0].process
        elif children:
            self.forward = self._fan_out
        else:
            self.forward = drop

    def process(self, key: Any, value: Any) -> None:
        self.forward(key, value)

    def _fan_out(self, key: Any, value: Any) -> None:
        for child in self.children:
            child.process(key, value)


class FilterProcessor(Processor):
    __slots__ = ("predicate",)

    def __init__(self, predicate: Callable[[Any, Any], bool]) -> None:
        super().__init__()
        self.predicate = predicate

    def process(self, key: Any, value: Any) -> None:
        if self.predicate(key, value):
            self.forward(key, value)


class BranchProcessor(Processor):
    """``split()``: the record goes to the child of the first predicate that holds (None: always)."""

    __slots__ = ("predicates",)

    def __init__(self, predicates: list[Callable[[Any, Any], bool] | None]) -> None:
        super().__init__()
        self.predicates = predicates

    def connect(self, children: list[Processor]) -> None:
        self.children = children  # routed by ``process``, never fanned out

    def process(self, key: Any, value: Any) -> None:
        for predicate, child in zip(self.predicates, self.children, strict=True):
            if predicate is None or predicate(key, value):
                child.process(key, value)
                return


class MapProcessor(Processor):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, value: Any) -> None:
        new_key, new_value = self.fn(key, value)
        self.forward(new_key, new_value)


class MapValuesProcessor(Processor):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, value: Any) -> None:
        self.forward(key, self.fn(value))


class FlatMapProcessor(Processor):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, value: Any) -> None:
        for new_key, new_value in self.fn(key, value):
            self.forward(new_key, new_value)


class PeekProcessor(Processor):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any, Any], None]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, value: Any) -> None:
        self.fn(key, value)
        self.forward(key, value)


class SinkProcessor(Processor):
    """Serializes and sends to a topic. External sinks pass the gate; repartition sinks carry the origin."""

    __slots__ = ("ctx", "gate", "internal", "key_serde", "send", "topic", "value_serde")

    def __init__(
        self,
        *,
        topic: str,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        send: Send,
        ctx: RecordContext,
        gate: SinkGate,
        internal: bool,
    ) -> None:
        super().__init__()
        self.topic = topic
        self.key_serde = key_serde
        self.value_serde = value_serde
        self.send = send
        self.ctx = ctx
        # a single deployment's gate lets everything through: no call per record for it
        self.gate: SinkGate | None = None if isinstance(gate, OpenGate) else gate
        self.internal = internal

    def process(self, key: Any, value: Any) -> None:
        ctx = self.ctx
        key_bytes = None if key is None else self.key_serde.serialize(key)
        value_bytes = None if value is None else self.value_serde.serialize(value)
        if self.internal:
            origin = encode_origin(ctx.origin_topic, ctx.origin_partition, ctx.origin_offset)
            self.send(self.topic, key_bytes, value_bytes, None, ctx.timestamp, [(ORIGIN_HEADER, origin)])
        elif self.gate is None or self.gate.allows(ctx.origin_topic, ctx.origin_partition, ctx.origin_offset):
            self.send(self.topic, key_bytes, value_bytes, None, ctx.timestamp, None)

    def process_serialized(self, key_bytes: bytes, value_bytes: bytes | None) -> None:
        """``process`` for a key and value already serialized with this sink's serdes (a store's flush)."""
        ctx = self.ctx
        if self.gate is None or self.gate.allows(ctx.origin_topic, ctx.origin_partition, ctx.origin_offset):
            self.send(self.topic, key_bytes, value_bytes, None, ctx.timestamp, None)


class AggregateProcessor(Processor):
    """Folds each record into the store; the store forwards updates (at once or at flush)."""

    __slots__ = ("aggregator", "initializer", "key_serialize", "store")

    def __init__(self, node: AggregateNode, store: TaskStore) -> None:
        super().__init__()
        self.store = store
        self.initializer = node.initializer
        self.aggregator = node.aggregator
        self.key_serialize = node.store.key_serde.serialize

    def connect(self, children: list[Processor]) -> None:
        super().connect(children)
        self.store.forward = self.forward  # the store forwards updates (at once, or at flush)
        # ``.to(topic)`` right after the aggregation, with the store's serdes: the sink's bytes
        # are the changelog's (a forward and two serializations less per flushed entry)
        sink = children[0] if len(children) == 1 else None
        spec = self.store.spec
        if (
            isinstance(sink, SinkProcessor)
            and not sink.internal
            and same_bytes(sink.key_serde, spec.key_serde)
            and same_bytes(sink.value_serde, spec.value_serde)
        ):
            self.store.forward_serialized = sink.process_serialized

    def process(self, key: Any, value: Any) -> None:
        # As in Kafka Streams' grouped-stream aggregations: a null key has no group, and a
        # null value (a tombstone on a stream) is skipped, not folded: count() does not count it.
        if key is None or value is None:
            return
        key_bytes = self.key_serialize(key)
        store = self.store
        current = store.get(key_bytes)
        if current is MISSING:
            current = self.initializer()
        store.put(key_bytes, key, self.aggregator(key, value, current))


STREAM_TIME_KEY = b""  # a window key is never empty: it ends in 8 or 16 bytes of window times
_TIME = struct.Struct(">q")


def stored_stream_time(store: TaskStore) -> int:
    """The stream time saved beside a store's windows (``NO_TIME`` before the first flush)."""
    raw = store.get_meta(STREAM_TIME_KEY)
    return NO_TIME if raw is None else int(_TIME.unpack(raw)[0])


def save_stream_time(store: TaskStore, stream_time: int) -> None:
    store.put_meta(STREAM_TIME_KEY, _TIME.pack(stream_time))


class _WindowedAggregate(Processor):
    """What time and session windows share: stream time, closing, expiry, final results.

    Stream time is the largest timestamp this aggregation has seen. It decides which
    records are late, which windows close and which expire, so it is state like the
    aggregates: saved in the store (``STREAM_TIME_KEY``, logged to the changelog at every
    flush, in the same transaction as the updates) and read back when a task starts or an
    aborted transaction is rewound. A restarted or promoted task thus drops, closes and
    emits exactly what an uninterrupted one would, which is what exactly-once output of
    final results needs. The window index is rebuilt from the store at the same moments.
    """

    __slots__ = (
        "advanced",
        "aggregator",
        "ctx",
        "final",
        "index",
        "initializer",
        "key_serialize",
        "on_late",
        "saved_time",
        "store",
        "store_key",
        "stream_time",
    )

    def __init__(
        self, node: AggregateNode, store: TaskStore, ctx: RecordContext, on_late: Callable[[], None]
    ) -> None:
        super().__init__()
        self.store = store
        self.initializer = node.initializer
        self.aggregator = node.aggregator
        self.key_serialize = node.store.key_serde.serialize
        self.store_key = node.store.key_serde.deserialize
        self.final = node.final
        self.ctx = ctx
        self.on_late = on_late
        self.index: WindowIndex | None = None
        self.stream_time = self.saved_time = self.advanced = NO_TIME
        store.before_flush = self._save_time
        store.after_discard = self._forget

    def connect(self, children: list[Processor]) -> None:
        super().connect(children)
        # under suppress nothing but a closed window's final value goes downstream
        self.store.forward = drop if self.final else self.forward

    def _forget(self) -> None:
        self.index = None

    def _save_time(self) -> None:
        if self.index is not None and self.stream_time != self.saved_time:
            save_stream_time(self.store, self.stream_time)
            self.saved_time = self.stream_time

    def _load(self) -> WindowIndex:
        self.stream_time = self.saved_time = self.advanced = stored_stream_time(self.store)
        index = WindowIndex()
        self._reset()
        for key_bytes, _ in self.store.persistent.items():
            if key_bytes != STREAM_TIME_KEY:
                self._track(index, key_bytes, self.store_key(key_bytes))
        index.pop_closed(self.stream_time)  # their final results went out before the restart
        self.index = index
        return index

    def _observe(self) -> WindowIndex:
        """The window index (loaded from the store at a task's first record), after stream
        time took in the current record's timestamp."""
        index = self.index if self.index is not None else self._load()
        self.stream_time = max(self.stream_time, self.ctx.timestamp)
        return index

    def _reset(self) -> None:
        """Drop per-key lookups derived from the store (sessions keep one)."""

    def _track(self, index: WindowIndex, key_bytes: bytes, window: Windowed[Any]) -> None:
        raise NotImplementedError

    def _untrack(self, key_bytes: bytes) -> None:
        """A window left the store."""

    def _advance(self, index: WindowIndex) -> None:
        """Stream time moved: emit the windows it closed (under suppress), delete the expired ones."""
        now = self.stream_time
        if now <= self.advanced:
            return
        self.advanced = now
        closed = index.pop_closed(now)
        if closed and self.final:
            store, forward = self.store, self.forward
            for key_bytes, window in closed:
                value = store.get(key_bytes)
                if value is not MISSING:
                    forward(window, value)
        expired = index.pop_expired(now)
        if expired:
            for key_bytes, _ in expired:
                self._untrack(key_bytes)
            self.store.expire([key_bytes for key_bytes, _ in expired])


class TimeWindowAggregateProcessor(_WindowedAggregate):
    """Tumbling and hopping windows: a record folds into every open window it falls in."""

    __slots__ = ("windows",)

    def __init__(
        self, node: AggregateNode, store: TaskStore, ctx: RecordContext, on_late: Callable[[], None]
    ) -> None:
        super().__init__(node, store, ctx, on_late)
        assert isinstance(node.windows, TimeWindows)
        self.windows: TimeWindows = node.windows

    def _track(self, index: WindowIndex, key_bytes: bytes, window: Windowed[Any]) -> None:
        index.add(
            key_bytes, window, self.windows.close_at(window.start), self.windows.expire_at(window.start)
        )

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        index = self._observe()
        ts, now = self.ctx.timestamp, self.stream_time
        windows, store = self.windows, self.store
        size = windows.size_ms
        folded = False
        for start in windows.starts_for(ts):
            close_at = start + size + windows.grace_ms
            if close_at <= now:
                continue  # late for this window: it closed, and a closed window never changes
            window = Windowed(key, start, start + size)
            key_bytes = self.key_serialize(window)
            current = store.get(key_bytes)
            if current is MISSING:
                current = self.initializer()
            store.put(key_bytes, window, self.aggregator(key, value, current))
            index.add(key_bytes, window, close_at, start + windows.retention_ms)
            folded = True
        if not folded:
            self.on_late()
        self._advance(index)


class SlidingWindowAggregateProcessor(_WindowedAggregate):
    """Sliding windows (KIP-450): the windows a record creates or falls in, per key.

    A record at ``t`` falls in every existing window ``[s, s + d]`` with ``s <= t <= s + d``
    (folded in incrementally, in arrival order), and makes new ones: its own left window
    ``[t - d, t]``, its right window ``[t + 1, t + 1 + d]`` if a later record is in it, and
    the right window of each earlier record within ``d + 1`` before it. A new window's
    aggregate is folded from the key's records in it, in timestamp order, which this
    processor keeps in a second store (``buffer``, changelogged like the windows) until no
    open window can contain them. Kafka Streams derives new windows from neighbouring ones
    instead; a buffer costs a record's bytes for ``d + grace`` of stream time and keeps the
    rule simple to check.
    """

    __slots__ = ("buffer", "buffered", "by_key", "inner_serialize", "windows")

    def __init__(  # noqa: PLR0917 - the aggregation's parts
        self,
        node: AggregateNode,
        store: TaskStore,
        buffer: TaskStore,
        ctx: RecordContext,
        on_late: Callable[[], None],
        inner: Serde[Any],
    ) -> None:
        super().__init__(node, store, ctx, on_late)
        assert isinstance(node.windows, SlidingWindows)
        self.windows: SlidingWindows = node.windows
        self.buffer = buffer
        self.inner_serialize = inner.serialize
        self.by_key: dict[bytes, dict[bytes, int]] = {}  # key bytes -> buffered record key -> timestamp
        self.buffered = WindowIndex()  # when each buffered record is no longer needed
        buffer.after_discard = self._forget

    def _track(self, index: WindowIndex, key_bytes: bytes, window: Windowed[Any]) -> None:
        index.add(
            key_bytes, window, self.windows.close_at(window.start), self.windows.expire_at(window.start)
        )

    def _load(self) -> WindowIndex:
        index = super()._load()
        self.by_key, self.buffered = {}, WindowIndex()
        for record_key, _ in self.buffer.persistent.items():
            self._remember(record_key, _BUFFERED.unpack(record_key[-16:])[0])
        return index

    def _remember(self, record_key: bytes, ts: int) -> None:
        self.by_key.setdefault(record_key[:-16], {})[record_key] = ts
        until = self.windows.close_at(ts)  # the last window that can hold it starts at ts
        self.buffered.add(record_key, ts, until, until)

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        index = self._observe()
        ctx, windows = self.ctx, self.windows
        ts, now, d = ctx.timestamp, self.stream_time, windows.difference_ms
        if windows.close_at(ts) <= now:  # every window that could hold it has closed
            self.on_late()
            self._advance(index)
            return
        inner = self.inner_serialize(key)
        record_key = inner + _BUFFERED.pack(ts, ctx.offset)
        self.buffer.put(record_key, key, value)
        self._remember(record_key, ts)
        near = sorted((t, k) for k, t in self.by_key[inner].items() if ts - d - 1 <= t <= ts + d + 1)
        starts = {ts - d}
        for t, _ in near:
            if ts - d - 1 <= t < ts:
                starts.add(t + 1)  # an earlier record's right window now holds this one
            elif ts < t <= ts + d:
                starts.add(t - d)  # a later record's left window holds this one
            if ts < t <= ts + d + 1:
                starts.add(ts + 1)  # this record's right window holds a later one
        store, folded = self.store, False
        for start in sorted(starts):
            close_at = windows.close_at(start)
            if close_at <= now or start < 0:
                continue  # a closed window never changes
            window = Windowed(key, start, start + d)
            window_key = self.key_serialize(window)
            current = store.get(window_key)
            if current is MISSING:
                current = self._fold(key, inner, start, start + d)
            elif start <= ts <= start + d:
                current = self.aggregator(key, value, current)
            else:
                continue
            store.put(window_key, window, current)
            index.add(window_key, window, close_at, windows.expire_at(start))
            folded = True
        if not folded:
            self.on_late()
        self._advance(index)
        self._expire_records()

    def _fold(self, key: Any, inner: bytes, low: int, high: int) -> Any:
        """A new window's aggregate: the key's buffered records in ``[low, high]``, by time."""
        value = self.initializer()
        for _t, record_key in sorted(
            (t, k) for k, t in self.by_key.get(inner, {}).items() if low <= t <= high
        ):
            record = self.buffer.get(record_key)
            if record is not MISSING:
                value = self.aggregator(key, record, value)
        return value

    def _expire_records(self) -> None:
        now = self.stream_time
        self.buffered.pop_closed(now)  # their times are equal: drain the close heap too
        gone = [record_key for record_key, _ in self.buffered.pop_expired(now)]
        if gone:
            for record_key in gone:
                records = self.by_key.get(record_key[:-16])
                if records is not None:
                    records.pop(record_key, None)
                    if not records:
                        del self.by_key[record_key[:-16]]
            self.buffer.expire(gone)


class SessionAggregateProcessor(_WindowedAggregate):
    """Session windows: a record extends (or bridges) the open sessions within the gap of it.

    Merged-away sessions are deleted, which forwards ``(old session, None)`` downstream
    unless suppressed, as Kafka Streams does.
    """

    __slots__ = ("by_key", "inner_serialize", "merger", "windows")

    def __init__(
        self,
        node: AggregateNode,
        store: TaskStore,
        ctx: RecordContext,
        on_late: Callable[[], None],
        inner: Serde[Any],
    ) -> None:
        super().__init__(node, store, ctx, on_late)
        assert isinstance(node.windows, SessionWindows) and node.merger is not None
        self.windows: SessionWindows = node.windows
        self.merger = node.merger
        self.inner_serialize = inner.serialize
        self.by_key: dict[bytes, dict[bytes, tuple[int, int]]] = {}  # key bytes -> session key bytes -> times

    def _reset(self) -> None:
        self.by_key = {}

    def _track(self, index: WindowIndex, key_bytes: bytes, window: Windowed[Any]) -> None:
        index.add(key_bytes, window, self.windows.close_at(window.end), self.windows.expire_at(window.end))
        self.by_key.setdefault(key_bytes[:-16], {})[key_bytes] = (window.start, window.end)

    def _untrack(self, key_bytes: bytes) -> None:
        sessions = self.by_key.get(key_bytes[:-16])
        if sessions is not None:
            sessions.pop(key_bytes, None)
            if not sessions:
                del self.by_key[key_bytes[:-16]]

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        index = self._observe()
        ts = self.ctx.timestamp
        windows, store = self.windows, self.store
        gap = windows.gap_ms
        start = end = ts
        merged: list[tuple[int, bytes]] = []
        for key_bytes, (s, e) in self.by_key.get(self.inner_serialize(key), {}).items():
            if e >= ts - gap and s <= ts + gap and not index.is_closed(key_bytes):
                merged.append((s, key_bytes))
                start, end = min(start, s), max(end, e)
        if windows.close_at(end) <= self.stream_time:
            # late: the session it would make is closed already (Kafka Streams judges the
            # merged session too, so a record inside an open session is never late)
            self.on_late()
            self._advance(index)
            return
        window = Windowed(key, start, end)
        new_bytes = self.key_serialize(window)
        current: Any = MISSING
        for _, key_bytes in sorted(merged):  # oldest session first: merger(key, older, newer)
            part = store.get(key_bytes)
            if part is not MISSING:
                current = part if current is MISSING else self.merger(key, current, part)
            if key_bytes != new_bytes:
                old = self.store_key(key_bytes)
                store.put(key_bytes, old, None)
                index.remove(key_bytes)
                self._untrack(key_bytes)
        if current is MISSING:
            current = self.initializer()
        store.put(new_bytes, window, self.aggregator(key, value, current))
        self._track(index, new_bytes, window)
        self._advance(index)


class JoinProcessor(Processor):
    """Looks the record's key up in a table and forwards ``joiner(value, table_value)``."""

    __slots__ = ("get", "joiner", "left")

    def __init__(self, node: JoinNode, lookup: Callable[[Any], Any]) -> None:
        super().__init__()
        self.get = lookup  # key -> the table's value, None if absent
        self.joiner = node.joiner
        self.left = node.left

    def process(self, key: Any, value: Any) -> None:
        other = None if key is None else self.get(key)
        if other is None:
            if self.left:
                self.forward(key, self.joiner(value, None))
            return
        self.forward(key, self.joiner(value, other))


class GlobalJoinProcessor(Processor):
    """Looks ``key(key, value)`` up in a global table's store; forwards ``joiner(value, table_value)``."""

    __slots__ = ("deserialize", "get", "joiner", "key_serialize", "left", "selector")

    def __init__(self, node: GlobalJoinNode, store: KeyValueStore) -> None:
        super().__init__()
        self.get = store.get
        self.selector, self.joiner, self.left = node.key, node.joiner, node.left
        self.key_serialize = node.table.store.key_serde.serialize
        self.deserialize = node.table.store.value_serde.deserialize

    def process(self, key: Any, value: Any) -> None:
        lookup = self.selector(key, value)
        raw = None if lookup is None else self.get(self.key_serialize(lookup))
        if raw is None:
            if self.left:
                self.forward(key, self.joiner(value, None))
            return
        self.forward(key, self.joiner(value, self.deserialize(raw)))


_BUFFERED = struct.Struct(">qq")  # a buffered join record's store key ends in (timestamp, offset)


class StreamJoinProcessor(Processor):
    """The shared state and output of a windowed stream-stream join (both sides feed it).

    Each side's records wait in that side's store, keyed ``key + timestamp + offset``,
    valued ``matched flag + value``, until stream time passes their window plus the
    grace period; then they are deleted, and a record of a side that keeps unmatched
    records (left join: the left; outer: both) that never matched is emitted with
    ``None`` for the other side. Stream time is stored in the left store, as windowed
    aggregations do, so a restarted task expires and emits exactly what this one would.
    """

    __slots__ = (
        "advanced",
        "by_key",
        "ctx",
        "expiry",
        "joiner",
        "keeps",
        "key_of",
        "node",
        "on_late",
        "saved_time",
        "stores",
        "stream_time",
        "value_serdes",
    )

    def __init__(
        self,
        node: StreamJoinNode,
        stores: dict[str, TaskStore],
        ctx: RecordContext,
        on_late: Callable[[], None],
    ) -> None:
        super().__init__()
        self.node = node
        self.ctx = ctx
        self.on_late = on_late
        self.joiner = node.joiner
        self.stores = (stores[node.left_store.name], stores[node.right_store.name])
        self.value_serdes = node.value_serdes  # the stores hold raw bytes: matched flag + value
        self.key_of = (node.left_store.key_serde.deserialize, node.right_store.key_serde.deserialize)
        self.keeps = (node.how in ("left", "outer"), node.how == "outer")
        self.expiry: tuple[WindowIndex, WindowIndex] | None = None
        self.by_key: tuple[dict[bytes, dict[bytes, int]], dict[bytes, dict[bytes, int]]] = ({}, {})
        self.stream_time = self.saved_time = self.advanced = NO_TIME
        self.stores[0].before_flush = self._save_time
        self.stores[0].after_discard = self._forget
        self.stores[1].after_discard = self._forget

    def _forget(self) -> None:
        self.expiry = None

    def _save_time(self) -> None:
        if self.expiry is not None and self.stream_time != self.saved_time:
            save_stream_time(self.stores[0], self.stream_time)
            self.saved_time = self.stream_time

    def _window_after(self, left: bool) -> int:
        w = self.node.windows
        return (w.after_ms if left else w.before_ms) + w.grace_ms

    def _load(self) -> tuple[WindowIndex, WindowIndex]:
        self.stream_time = self.saved_time = self.advanced = stored_stream_time(self.stores[0])
        self.by_key = ({}, {})
        expiry = (WindowIndex(), WindowIndex())
        for side in (0, 1):
            for store_key, _ in self.stores[side].persistent.items():
                if store_key != STREAM_TIME_KEY:
                    ts = _BUFFERED.unpack(store_key[-16:])[0]
                    self._track(side, expiry[side], store_key, ts)
        self.expiry = expiry
        return expiry

    def _track(self, side: int, expiry: WindowIndex, store_key: bytes, ts: int) -> None:
        self.by_key[side].setdefault(store_key[:-16], {})[store_key] = ts
        at = ts + self._window_after(side == 0)
        expiry.add(store_key, ts, at, at)

    def arrive(self, side: int, key: Any, key_bytes: bytes, value: Any) -> None:
        """A record of ``side`` (0 left, 1 right): buffer it, join it with the other side's partners.

        A record whose window closed already (stream time passed it plus the grace period)
        is not buffered: nothing may join it later. As in Kafka Streams' ``KStreamKStreamJoin``
        it still joins the partners buffered now, and if it has none, a side that keeps
        unmatched records (left join's left, outer join's both) emits it at once with
        ``None`` for the other side, rather than dropping it; only an unmatched late record
        of an inner side is dropped (counted as late).
        """
        expiry = self.expiry if self.expiry is not None else self._load()
        ts = self.ctx.timestamp
        self.stream_time = max(self.stream_time, ts)
        if ts + self._window_after(side == 0) <= self.stream_time:
            if not self._join_partners(side, key, key_bytes, value, ts):
                if self.keeps[side]:
                    self.forward(key, self.joiner(value, None) if side == 0 else self.joiner(None, value))
                else:
                    self.on_late()
            self._expire()
            return
        matched = self._join_partners(side, key, key_bytes, value, ts)
        own_key = key_bytes + _BUFFERED.pack(ts, self.ctx.offset)
        own = b"\x01" if matched else b"\x00"
        self.stores[side].put(own_key, key, own + self.value_serdes[side].serialize(value))
        self._track(side, expiry[side], own_key, ts)
        self._expire()

    def _join_partners(self, side: int, key: Any, key_bytes: bytes, value: Any, ts: int) -> bool:
        """Forward the joins of this record with the other side's buffered partners; any?"""
        left = side == 0
        w, ctx = self.node.windows, self.ctx
        low, high = (ts - w.before_ms, ts + w.after_ms) if left else (ts - w.after_ms, ts + w.before_ms)
        other = 1 - side
        other_store, other_serde = self.stores[other], self.value_serdes[other]
        matched = False
        partners = sorted(
            (t, k) for k, t in self.by_key[other].get(key_bytes, {}).items() if low <= t <= high
        )
        for other_ts, other_key in partners:
            raw = other_store.get(other_key)
            if raw is MISSING:
                continue
            other_matched, other_value = raw[0], other_serde.deserialize(raw[1:])
            if not other_matched and self.keeps[other]:
                other_store.put(other_key, key, b"\x01" + raw[1:])
            saved, ctx.timestamp = ctx.timestamp, max(ts, other_ts)
            try:
                self.forward(
                    key, self.joiner(value, other_value) if left else self.joiner(other_value, value)
                )
            finally:
                ctx.timestamp = saved
            matched = True
        return matched

    def _expire(self) -> None:
        """Stream time moved: records past their window leave; unmatched ones of a keeping side go out."""
        now = self.stream_time
        if now <= self.advanced or self.expiry is None:
            return
        self.advanced = now
        gone: list[tuple[int, int, bytes]] = []
        for side in (0, 1):
            self.expiry[side].pop_closed(now)  # close and expiry are one time here: drain both heaps
            for store_key, ts in self.expiry[side].pop_expired(now):
                gone.append((ts, side, store_key))
        ctx = self.ctx
        for ts, side, store_key in sorted(gone):
            store = self.stores[side]
            self.by_key[side].get(store_key[:-16], {}).pop(store_key, None)
            if self.keeps[side]:
                raw = store.get(store_key)
                if raw is not MISSING and not raw[0]:
                    value = self.value_serdes[side].deserialize(raw[1:])
                    key = self.key_of[side](store_key[:-16])
                    saved, ctx.timestamp = ctx.timestamp, ts
                    try:
                        self.forward(key, self.joiner(value, None) if side == 0 else self.joiner(None, value))
                    finally:
                        ctx.timestamp = saved
            store.expire([store_key])


class StreamJoinSideProcessor(Processor):
    """Hands one side's records to the join (its single child)."""

    __slots__ = ("key_serialize", "side")

    def __init__(self, node: StreamJoinSideNode) -> None:
        super().__init__()
        self.side = 0 if node.left else 1
        self.key_serialize = node.key_serde.serialize

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:  # Kafka Streams drops them from stream-stream joins
            return
        join = self.children[0]
        assert isinstance(join, StreamJoinProcessor)
        join.arrive(self.side, key, self.key_serialize(key), value)


class _StoreView:
    """A declared store as a custom processor sees it: objects in, objects out."""

    __slots__ = ("_key", "_store")

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self._key = store.spec.key_serde.serialize

    def get(self, key: Any) -> Any:
        value = self._store.get(self._key(key))
        return None if value is MISSING else value

    def put(self, key: Any, value: Any) -> None:
        self._store.put(self._key(key), key, value)

    def delete(self, key: Any) -> None:
        self._store.put(self._key(key), key, None)


class _Context:
    """``ProcessorContext`` for one custom processor of one task."""

    __slots__ = ("_ctx", "_processor", "_punctuations", "_stores", "_stream_time")

    def __init__(
        self,
        processor: Processor,
        stores: dict[str, _StoreView],
        ctx: RecordContext,
        punctuations: Punctuations,
        stream_time: Callable[[], int],
    ) -> None:
        self._processor = processor
        self._stores = stores
        self._ctx = ctx
        self._punctuations = punctuations
        self._stream_time = stream_time

    def forward(self, key: Any, value: Any) -> None:
        self._processor.forward(key, value)

    def store(self, name: str) -> _StoreView:
        try:
            return self._stores[name]
        except KeyError:
            raise KeyError(f"store {name!r} is not one this processor named in process(stores=...)") from None

    def schedule(
        self, interval: int | timedelta, kind: PunctuationType, callback: Callable[[int], None]
    ) -> Schedule:
        ms = int(interval.total_seconds() * 1000) if isinstance(interval, timedelta) else int(interval)
        return self._punctuations.add(ms, kind, callback)

    @property
    def topic(self) -> str:
        return self._ctx.topic

    @property
    def partition(self) -> int:
        return self._ctx.partition

    @property
    def offset(self) -> int:
        return self._ctx.offset

    @property
    def timestamp(self) -> int:
        return self._ctx.timestamp

    @property
    def stream_time(self) -> int:
        return self._stream_time()


class CustomProcessor(Processor):
    """Runs a user's ``baton.Processor``; its stores never forward (only ``context.forward`` does)."""

    __slots__ = ("context", "initialized", "user")

    def __init__(
        self,
        node: CustomNode,
        stores: dict[str, TaskStore],
        ctx: RecordContext,
        punctuations: Punctuations,
        stream_time: Callable[[], int],
    ) -> None:
        super().__init__()
        self.user = node.factory()
        views = {spec.name: _StoreView(stores[spec.name]) for spec in node.stores}
        self.context = _Context(self, views, ctx, punctuations, stream_time)
        self.initialized = False

    def connect(self, children: list[Processor]) -> None:
        super().connect(children)
        if not self.initialized:  # after connect: init may already forward or schedule
            self.initialized = True
            self.user.init(self.context)

    def process(self, key: Any, value: Any) -> None:
        self.user.process(key, value)
