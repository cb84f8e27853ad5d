"""Windowed aggregations (time, sliding and session windows) and the stream time they keep.

Stream time is saved beside the windows in their store, and a windowed stream-stream
join (``processors/joins.py``) saves its own the same way, so both read it from here.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

from baton.worker.runtime.processors.base import ProcessorNode, drop
from baton.worker.runtime.processors.stateless import bytes_sink
from baton.worker.runtime.punctuation import NO_TIME
from baton.worker.runtime.window_index import WindowIndex
from baton.worker.state.task_store import MISSING, TaskStore
from baton.worker.topology.context import RecordContext
from baton.worker.topology.graph import AggregateNode
from baton.worker.topology.serdes import Serde
from baton.worker.topology.windows import SessionWindows, SlidingWindows, TimeWindows, Windowed

STREAM_TIME_KEY = b""  # a window key is never empty: it ends in 8 or 16 bytes of window times
_TIME = struct.Struct(">q")


def stored_stream_time(store: TaskStore) -> int:
    """The stream time saved beside a store's windows (``NO_TIME`` before the first flush)."""
    raw = store.get_meta(STREAM_TIME_KEY)
    return NO_TIME if raw is None else int(_TIME.unpack(raw)[0])


def save_stream_time(store: TaskStore, stream_time: int) -> None:
    store.put_meta(STREAM_TIME_KEY, _TIME.pack(stream_time))


BUFFERED = struct.Struct(">qq")  # a buffered record's store key ends in (timestamp, offset)
NEVER = 2**63 - 1  # no window is due: stream time never reaches it


class WindowTimes(WindowIndex):
    """A windowed aggregation's index, which also says when it next has anything to report.

    Stream time moves with nearly every record, and ``_advance`` is a call that finds nothing
    to close or expire almost every time. The fused loop (``runtime/fused_chain.py``) calls it
    only once stream time reaches ``next_due``.
    """

    __slots__ = ()

    def next_due(self) -> int:
        """The earliest stream time at which ``pop_closed`` or ``pop_expired`` may return a window.

        A lower bound: a merged-away session's entries stay in the heaps until they surface.
        """
        closing, expiring = self._closing, self._expiring
        due = closing[0][0] if closing else NEVER
        return min(due, expiring[0][0]) if expiring else due


class _WindowedAggregate(ProcessorNode):
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
        self.index: WindowTimes | None = None
        self.stream_time = self.saved_time = self.advanced = NO_TIME
        store.before_flush = self._save_time
        store.after_discard = self._forget

    def connect(self, children: list[ProcessorNode]) -> None:
        super().connect(children)
        # under suppress nothing but a closed window's final value goes downstream
        self.store.forward = drop if self.final else self.forward
        # ``.to_stream().to(topic)`` with the table's serdes: the sink takes the changelog's bytes
        self.store.forward_serialized = None if self.final else bytes_sink(children, self.store.spec)

    def _forget(self) -> None:
        self.index = None

    def _save_time(self) -> None:
        if self.index is not None and self.stream_time != self.saved_time:
            save_stream_time(self.store, self.stream_time)
            self.saved_time = self.stream_time

    def _load(self) -> WindowTimes:
        self.stream_time = self.saved_time = self.advanced = stored_stream_time(self.store)
        index = WindowTimes()
        self._reset()
        for key_bytes, _ in self.store.persistent.items():
            if key_bytes != STREAM_TIME_KEY:
                self._track(index, key_bytes, self.store_key(key_bytes))
        index.pop_closed(self.stream_time)  # their final results went out before the restart
        self.index = index
        return index

    def _observe(self) -> WindowTimes:
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

    def _advance(self, index: WindowTimes) -> None:
        """Stream time moved: emit the windows it closed (under suppress), delete the expired ones."""
        now = self.stream_time
        if now <= self.advanced:
            return
        self.advanced = now
        if now < index.next_due():
            return  # the common case: no window closes or expires yet (two calls and two lists saved)
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
            # a window the index does not hold is in neither the cache nor RocksDB: no read
            current = store.get(key_bytes) if key_bytes in index else MISSING
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

    def _load(self) -> WindowTimes:
        index = super()._load()
        self.by_key, self.buffered = {}, WindowIndex()
        for record_key, _ in self.buffer.persistent.items():
            self._remember(record_key, BUFFERED.unpack(record_key[-16:])[0])
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
        record_key = inner + BUFFERED.pack(ts, ctx.offset)
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
            # a new window (not in the index) needs no store read: about half of what a record
            # touches here, each a RocksDB miss (docs/benchmarks.md, "Measured design choices": window-reads)
            current = store.get(window_key) if window_key in index else MISSING
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
                # the index holds the session's key object: decoding its bytes again cost ~15 % of
                # a session record (a frozen dataclass and the inner key's decode)
                old = index.window(key_bytes)
                if old is None:
                    old = self.store_key(key_bytes)
                store.put(key_bytes, old, None)
                index.remove(key_bytes)
                self._untrack(key_bytes)
        if current is MISSING:
            current = self.initializer()
        store.put(new_bytes, window, self.aggregator(key, value, current))
        self._track(index, new_bytes, window)
        self._advance(index)
