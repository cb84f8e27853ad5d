"""Aggregations of a grouped stream or table: fold each record (or each change) into a store.

The factory picks the processor by the node's windows; the windowed ones are in
``processors/windowed.py``. The store forwards the updates, at once or at its flush.
"""

from __future__ import annotations

from typing import Any

from baton.worker.runtime.processors.base import Build, Factory, ProcessorNode
from baton.worker.runtime.processors.stateless import bytes_sink
from baton.worker.runtime.processors.windowed import (
    SessionAggregateProcessor,
    SlidingWindowAggregateProcessor,
    TimeWindowAggregateProcessor,
)
from baton.worker.state.task_store import MISSING, TaskStore
from baton.worker.topology.graph import AggregateNode, Node
from baton.worker.topology.serdes import Serde
from baton.worker.topology.windows import (
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    WindowedSerde,
)


class AggregateProcessor(ProcessorNode):
    """Folds each record into the store; the store forwards updates (at once or at flush)."""

    __slots__ = ("aggregator", "initializer", "key_serialize", "store")

    def __init__(self, node: AggregateNode, store: TaskStore) -> None:
        super().__init__()
        self.store = store
        self.initializer = node.initializer
        self.aggregator = node.aggregator
        self.key_serialize = node.store.key_serde.serialize

    def connect(self, children: list[ProcessorNode]) -> None:
        super().connect(children)
        self.store.forward = self.forward  # the store forwards updates (at once, or at flush)
        # ``.to(topic)`` right after the aggregation, with the store's serdes: the changelog's bytes
        self.store.forward_serialized = bytes_sink(children, self.store.spec)

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


class TableAggregateProcessor(AggregateProcessor):
    """A grouped table's aggregation: subtract what left the group, add what joined it."""

    __slots__ = ("subtractor",)

    def __init__(self, node: AggregateNode, store: TaskStore) -> None:
        super().__init__(node, store)
        assert node.subtractor is not None
        self.subtractor = node.subtractor

    def process(self, key: Any, value: Any) -> None:
        if key is None or value is None:
            return
        old, new = value
        key_bytes = self.key_serialize(key)
        current = self.store.get(key_bytes)
        if current is MISSING:
            current = self.initializer()
        if old is not None:
            current = self.subtractor(key, old, current)
        if new is not None:
            current = self.aggregator(key, new, current)
        self.store.put(key_bytes, key, current)


def _aggregate(node: AggregateNode, build: Build) -> ProcessorNode:
    store = build.stores[node.store.name]
    if node.subtractor is not None:
        return TableAggregateProcessor(node, store)
    key_serde: Serde[object] = node.store.key_serde
    if isinstance(node.windows, SlidingWindows):
        assert isinstance(key_serde, WindowedSerde) and node.buffer is not None
        buffer = build.stores[node.buffer.name]
        return SlidingWindowAggregateProcessor(node, store, buffer, build.ctx, build.on_late, key_serde.inner)
    if isinstance(node.windows, TimeWindows):
        return TimeWindowAggregateProcessor(node, store, build.ctx, build.on_late)
    if isinstance(node.windows, SessionWindows):
        assert isinstance(key_serde, SessionWindowedSerde)
        return SessionAggregateProcessor(node, store, build.ctx, build.on_late, key_serde.inner)
    return AggregateProcessor(node, store)


FACTORIES: dict[type[Node], Factory] = {AggregateNode: _aggregate}
