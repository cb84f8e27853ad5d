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

from collections.abc import Callable, Mapping
from typing import Any

from baton.worker.state.task_store import MISSING, TaskStore
from baton.worker.topology.context import (
    ORIGIN_HEADER,
    OpenGate,
    RecordContext,
    Send,
    SinkGate,
    encode_origin,
)
from baton.worker.topology.graph import (
    AggregateNode,
    FilterNode,
    FlatMapNode,
    JoinNode,
    MapNode,
    MapValuesNode,
    Node,
    PeekNode,
    SinkNode,
    SourceNode,
)
from baton.worker.topology.serdes import Serde
from baton.worker.topology.windows import TimeWindows, Windowed


def _drop(_key: Any, _value: Any) -> None:
    """``forward`` of a processor without children (a terminal node): nothing downstream."""


class Processor:
    __slots__ = ("children", "forward")

    def __init__(self) -> None:
        self.children: list[Processor] = []
        self.forward: Callable[[Any, Any], None] = _drop

    def connect(self, children: list[Processor]) -> None:
        """Set the children and bind ``forward`` to them."""
        self.children = children
        if len(children) == 1:
            self.forward = children[0].process
        elif children:
            self.forward = self._fan_out
        else:
            self.forward = _drop

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


class AggregateProcessor(Processor):
    """Folds each record into the store; the store forwards updates (at once or at flush)."""

    __slots__ = ("aggregator", "ctx", "initializer", "key_serialize", "store", "windows")

    def __init__(self, node: AggregateNode, store: TaskStore, ctx: RecordContext) -> None:
        super().__init__()
        self.store = store
        self.initializer = node.initializer
        self.aggregator = node.aggregator
        self.windows: TimeWindows | None = node.windows
        self.key_serialize = node.store.key_serde.serialize
        self.ctx = ctx

    def connect(self, children: list[Processor]) -> None:
        super().connect(children)
        self.store.forward = self.forward  # the store forwards updates (at once, or at flush)

    def process(self, key: Any, value: Any) -> None:
        # As in Kafka Streams' grouped-stream aggregations: a null key has no group, and a
        # null value (a tombstone on a stream) is skipped, not folded: count() does not count it.
        if key is None or value is None:
            return
        if self.windows is None:  # _update inlined: this is the per-record path of every count
            key_bytes = self.key_serialize(key)
            store = self.store
            current = store.get(key_bytes)
            if current is MISSING:
                current = self.initializer()
            store.put(key_bytes, key, self.aggregator(key, value, current))
            return
        size = self.windows.size_ms
        for start in self.windows.starts_for(self.ctx.timestamp):
            self._update(Windowed(key, start, start + size), value)

    def _update(self, key: Any, value: Any) -> None:
        key_bytes = self.key_serialize(key)
        current = self.store.get(key_bytes)
        if current is MISSING:
            current = self.initializer()
        self.store.put(key_bytes, key, self.aggregator(key, value, current))


class JoinProcessor(Processor):
    """Looks the record's key up in a table store and forwards ``joiner(value, table_value)``."""

    __slots__ = ("get", "joiner", "key_serialize", "left", "table_deserialize")

    def __init__(self, node: JoinNode, lookup: Callable[[bytes], bytes | None]) -> None:
        super().__init__()
        self.get = lookup
        self.joiner = node.joiner
        self.left = node.left
        self.key_serialize = node.table.store.key_serde.serialize
        self.table_deserialize = node.table.store.value_serde.deserialize

    def process(self, key: Any, value: Any) -> None:
        raw = None if key is None else self.get(self.key_serialize(key))
        if raw is None:
            if self.left:
                self.forward(key, self.joiner(value, None))
            return
        self.forward(key, self.joiner(value, self.table_deserialize(raw)))


def build_tree(
    source: SourceNode,
    *,
    ctx: RecordContext,
    send: Send,
    gate: SinkGate,
    stores: dict[str, TaskStore],
    tables: Mapping[str, Callable[[bytes], bytes | None]],
    topic_name: Callable[[str, bool], str],
    memo: dict[int, Processor],
) -> Processor:
    """Instantiate the processors below ``source`` for one task (``memo`` shares nodes between sources)."""

    def make(node: Node) -> Processor:
        if id(node) in memo:
            return memo[id(node)]
        proc: Processor
        if isinstance(node, SourceNode):
            proc = Processor()
        elif isinstance(node, FilterNode):
            proc = FilterProcessor(node.predicate)
        elif isinstance(node, MapNode):
            proc = MapProcessor(node.fn)
        elif isinstance(node, MapValuesNode):
            proc = MapValuesProcessor(node.fn)
        elif isinstance(node, FlatMapNode):
            proc = FlatMapProcessor(node.fn)
        elif isinstance(node, PeekNode):
            proc = PeekProcessor(node.fn)
        elif isinstance(node, SinkNode):
            proc = SinkProcessor(
                topic=topic_name(node.topic, node.internal),
                key_serde=node.key_serde,
                value_serde=node.value_serde,
                send=send,
                ctx=ctx,
                gate=gate,
                internal=node.internal,
            )
        elif isinstance(node, AggregateNode):
            proc = AggregateProcessor(node, stores[node.store.name], ctx)
        elif isinstance(node, JoinNode):
            proc = JoinProcessor(node, tables[node.table.store.name])
        else:  # pragma: no cover - the DSL makes no other nodes
            raise TypeError(f"no processor for {type(node).__name__}")
        memo[id(node)] = proc
        proc.connect([make(child) for child in node.children])
        return proc

    return make(source)
