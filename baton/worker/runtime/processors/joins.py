"""Stream joins: with a table, with a global table, and windowed with another stream.

Table-table and foreign-key joins take and make a table's changes: they are in
``processors/table.py`` with the other processors of changes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baton.worker.runtime.processors.base import Factory, ProcessorNode
from baton.worker.runtime.processors.windowed import (
    BUFFERED,
    STREAM_TIME_KEY,
    save_stream_time,
    stored_stream_time,
)
from baton.worker.runtime.punctuation import NO_TIME
from baton.worker.runtime.window_index import WindowIndex
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import MISSING, TaskStore
from baton.worker.topology.context import RecordContext
from baton.worker.topology.graph import GlobalJoinNode, JoinNode, Node, StreamJoinNode, StreamJoinSideNode


class JoinProcessor(ProcessorNode):
    """Looks the record's key up in a table and forwards ``joiner(value, table_value)``."""

    __slots__ = ("get", "joiner", "left", "table")

    def __init__(self, node: JoinNode, lookup: Callable[[Any], Any]) -> None:
        super().__init__()
        self.get = lookup  # key -> the table's value, None if absent
        self.joiner = node.joiner
        self.left = node.left
        self.table = node.table  # what the fused loop reads itself when it is a tailed table

    def process(self, key: Any, value: Any) -> None:
        other = None if key is None else self.get(key)
        if other is None:
            if self.left:
                self.forward(key, self.joiner(value, None))
            return
        self.forward(key, self.joiner(value, other))


class GlobalJoinProcessor(ProcessorNode):
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


class StreamJoinProcessor(ProcessorNode):
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
                    ts = BUFFERED.unpack(store_key[-16:])[0]
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
        own_key = key_bytes + BUFFERED.pack(ts, self.ctx.offset)
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


class StreamJoinSideProcessor(ProcessorNode):
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


FACTORIES: dict[type[Node], Factory] = {
    JoinNode: lambda node, build: JoinProcessor(node, build.value_of(node.table)),
    GlobalJoinNode: lambda node, build: GlobalJoinProcessor(node, build.global_stores[node.table.store.name]),
    StreamJoinNode: lambda node, build: StreamJoinProcessor(node, build.stores, build.ctx, build.on_late),
    StreamJoinSideNode: lambda node, _build: StreamJoinSideProcessor(node),
}
