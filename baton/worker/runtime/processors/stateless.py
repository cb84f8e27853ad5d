"""Stateless processors: record in, records out, nothing kept (Kafka Streams' ``KStreamFilter``,
``KStreamMap``, ``KStreamBranch`` and the like), and the sink that writes to a topic.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baton.worker.runtime.processors.base import Build, Factory, ProcessorNode
from baton.worker.topology.context import (
    OpenGate,
    RecordContext,
    Send,
    SinkGate,
)
from baton.worker.topology.graph import (
    BranchNode,
    FilterNode,
    FlatMapNode,
    MapNode,
    MapValuesNode,
    Node,
    PeekNode,
    SelectKeyNode,
    SinkNode,
    StoreSpec,
)
from baton.worker.topology.serdes import Serde, same_bytes


class FilterProcessor(ProcessorNode):
    __slots__ = ("predicate",)

    def __init__(self, predicate: Callable[[Any, Any], bool]) -> None:
        super().__init__()
        self.predicate = predicate

    def process(self, key: Any, value: Any) -> None:
        if self.predicate(key, value):
            self.forward(key, value)


class BranchProcessor(ProcessorNode):
    """``split()``: the record goes to the child of the first predicate that holds (None: always)."""

    __slots__ = ("predicates",)

    def __init__(self, predicates: list[Callable[[Any, Any], bool] | None]) -> None:
        super().__init__()
        self.predicates = predicates

    def connect(self, children: list[ProcessorNode]) -> None:
        self.children = children  # routed by ``process``, never fanned out

    def process(self, key: Any, value: Any) -> None:
        for predicate, child in zip(self.predicates, self.children, strict=True):
            if predicate is None or predicate(key, value):
                child.process(key, value)
                return


class MapProcessor(ProcessorNode):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, value: Any) -> None:
        new_key, new_value = self.fn(key, value)
        self.forward(new_key, new_value)


class SelectKeyProcessor(ProcessorNode):
    __slots__ = ("selector",)

    def __init__(self, selector: Callable[[Any, Any], Any]) -> None:
        super().__init__()
        self.selector = selector

    def process(self, key: Any, value: Any) -> None:
        self.forward(self.selector(key, value), value)


class MapValuesProcessor(ProcessorNode):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, value: Any) -> None:
        self.forward(key, self.fn(value))


class FlatMapProcessor(ProcessorNode):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any, Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, value: Any) -> None:
        for new_key, new_value in self.fn(key, value):
            self.forward(new_key, new_value)


class PeekProcessor(ProcessorNode):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any, Any], None]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, value: Any) -> None:
        self.fn(key, value)
        self.forward(key, value)


class SinkProcessor(ProcessorNode):
    """Serializes and sends to a topic. External sinks pass the gate; repartition sinks do not."""

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
        if self.internal or self.gate is None or self.gate.allows(ctx.topic, ctx.partition, ctx.offset):
            self.send(self.topic, key_bytes, value_bytes, None, ctx.timestamp, None)

    def process_serialized(self, key_bytes: bytes, value_bytes: bytes | None) -> None:
        """``process`` for a key and value already serialized with this sink's serdes (a store's flush)."""
        ctx = self.ctx
        if self.gate is None or self.gate.allows(ctx.topic, ctx.partition, ctx.offset):
            self.send(self.topic, key_bytes, value_bytes, None, ctx.timestamp, None)


def bytes_sink(
    children: list[ProcessorNode], spec: StoreSpec
) -> Callable[[bytes, bytes | None], None] | None:
    """What a store's flush may hand its changelog bytes to instead of forwarding its updates.

    When an aggregation's one child is an external sink with the store's serdes
    (``.to_stream().to(...)``), the sink would serialize each flushed key and value to the
    bytes the changelog just got: it takes those (``TaskStore.forward_serialized``), a
    forward and two serializations less per flushed entry.
    """
    sink = children[0] if len(children) == 1 else None
    if (
        isinstance(sink, SinkProcessor)
        and not sink.internal
        and same_bytes(sink.key_serde, spec.key_serde)
        and same_bytes(sink.value_serde, spec.value_serde)
    ):
        return sink.process_serialized
    return None


def _sink(node: SinkNode, build: Build) -> ProcessorNode:
    return SinkProcessor(
        topic=build.topic_name(node.topic, node.internal),
        key_serde=node.key_serde,
        value_serde=node.value_serde,
        send=build.send,
        ctx=build.ctx,
        gate=build.gate,
        internal=node.internal,
    )


FACTORIES: dict[type[Node], Factory] = {
    BranchNode: lambda node, _build: BranchProcessor(node.predicates),
    FilterNode: lambda node, _build: FilterProcessor(node.predicate),
    MapNode: lambda node, _build: MapProcessor(node.fn),
    MapValuesNode: lambda node, _build: MapValuesProcessor(node.fn),
    SelectKeyNode: lambda node, _build: SelectKeyProcessor(node.selector),
    FlatMapNode: lambda node, _build: FlatMapProcessor(node.fn),
    PeekNode: lambda node, _build: PeekProcessor(node.fn),
    SinkNode: _sink,
}
