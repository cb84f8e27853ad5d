"""One task's processors, made from its sub-topology's nodes.

Kept apart from the processors themselves: this is the one place that knows every kind
of node, stream and table alike, and how a table's changes reach consumers that want plain
records (an aggregation read both by ``to_stream()`` and by a table operation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from baton.worker.runtime.processors import (
    AggregateProcessor,
    BranchProcessor,
    CustomProcessor,
    FilterProcessor,
    FlatMapProcessor,
    GlobalJoinProcessor,
    JoinProcessor,
    MapProcessor,
    MapValuesProcessor,
    PeekProcessor,
    Processor,
    SessionAggregateProcessor,
    SinkProcessor,
    SlidingWindowAggregateProcessor,
    StreamJoinProcessor,
    StreamJoinSideProcessor,
    TimeWindowAggregateProcessor,
)
from baton.worker.runtime.punctuation import NO_TIME, Punctuations
from baton.worker.runtime.table_processors import (
    ForeignKeyIndexProcessor,
    ForeignKeyIndexSideProcessor,
    ForeignKeyResultProcessor,
    ForeignKeySubscribeProcessor,
    TableAggregateProcessor,
    TableFilterProcessor,
    TableGroupByProcessor,
    TableJoinProcessor,
    TableJoinSideProcessor,
    TableMapValuesProcessor,
    TableSourceProcessor,
    ToStreamProcessor,
    value_getter,
)
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import TaskStore
from baton.worker.topology.context import RecordContext, Send, SinkGate
from baton.worker.topology.graph import (
    AggregateNode,
    BranchNode,
    CustomNode,
    FilterNode,
    FlatMapNode,
    ForeignKeyIndexNode,
    ForeignKeyIndexSideNode,
    ForeignKeyResultNode,
    ForeignKeySubscribeNode,
    GlobalJoinNode,
    JoinNode,
    MapNode,
    MapValuesNode,
    Node,
    PassThroughNode,
    PeekNode,
    SinkNode,
    SourceNode,
    StreamJoinNode,
    StreamJoinSideNode,
    TableFilterNode,
    TableGroupByNode,
    TableJoinNode,
    TableJoinSideNode,
    TableMapValuesNode,
    TableNode,
    ToStreamNode,
    takes_changes,
)
from baton.worker.topology.serdes import Serde
from baton.worker.topology.windows import (
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    WindowedSerde,
)


def build_tree(
    source: SourceNode,
    *,
    ctx: RecordContext,
    send: Send,
    gate: SinkGate,
    stores: dict[str, TaskStore],
    tables: Mapping[str, Callable[[bytes], bytes | None]],
    global_stores: Mapping[str, KeyValueStore],
    topic_name: Callable[[str, bool], str],
    memo: dict[int, Processor],
    on_late: Callable[[], None] = lambda: None,
    punctuations: Punctuations | None = None,
    stream_time: Callable[[], int] = lambda: NO_TIME,
) -> Processor:
    """Instantiate the processors below ``source`` for one task (``memo`` shares nodes between sources)."""

    def getter(node: Node) -> Callable[[object], object]:
        return value_getter(node, stores, tables)

    def make(node: Node) -> Processor:
        if id(node) in memo:
            return memo[id(node)]
        proc: Processor
        if isinstance(node, SourceNode | PassThroughNode):
            proc = Processor()
        elif isinstance(node, BranchNode):
            proc = BranchProcessor(node.predicates)
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
            proc = _aggregate(node, stores, ctx, on_late)
        elif isinstance(node, JoinNode):
            proc = JoinProcessor(node, getter(node.table))
        elif isinstance(node, GlobalJoinNode):
            proc = GlobalJoinProcessor(node, global_stores[node.table.store.name])
        elif isinstance(node, StreamJoinNode):
            proc = StreamJoinProcessor(node, stores, ctx, on_late)
        elif isinstance(node, StreamJoinSideNode):
            proc = StreamJoinSideProcessor(node)
        elif isinstance(node, CustomNode):
            assert punctuations is not None, "a task with custom processors keeps their punctuators"
            proc = CustomProcessor(node, stores, ctx, punctuations, stream_time)
        elif isinstance(node, TableNode):
            proc = TableSourceProcessor(node, stores[node.store.name])
        elif isinstance(node, TableFilterNode):
            proc = TableFilterProcessor(node.predicate)
        elif isinstance(node, TableMapValuesNode):
            proc = TableMapValuesProcessor(node.fn)
        elif isinstance(node, ToStreamNode):
            proc = ToStreamProcessor()
        elif isinstance(node, TableGroupByNode):
            proc = TableGroupByProcessor(node.selector)
        elif isinstance(node, TableJoinNode):
            proc = TableJoinProcessor(node, getter(node.left), getter(node.right))
        elif isinstance(node, TableJoinSideNode):
            join = make(node.join)
            assert isinstance(join, TableJoinProcessor)
            proc = TableJoinSideProcessor(join, node.left)
        elif isinstance(node, ForeignKeyResultNode):
            proc = ForeignKeyResultProcessor(node, stores[node.store.name], getter(node.left))
        elif isinstance(node, ForeignKeySubscribeNode):
            result = make(node.result)
            assert isinstance(result, ForeignKeyResultProcessor)
            proc = ForeignKeySubscribeProcessor(node, result)
        elif isinstance(node, ForeignKeyIndexNode):
            proc = ForeignKeyIndexProcessor(node, stores[node.store.name], getter(node.right))
        elif isinstance(node, ForeignKeyIndexSideNode):
            index = make(node.index)
            assert isinstance(index, ForeignKeyIndexProcessor)
            proc = ForeignKeyIndexSideProcessor(index, node.registration)
        else:  # pragma: no cover - the DSL makes no other nodes
            raise TypeError(f"no processor for {type(node).__name__}")
        memo[id(node)] = proc
        children = [make(child) for child in node.children]
        if isinstance(node, AggregateNode) and any(takes_changes(c) for c in node.children):
            # table operations read this aggregation's changes; to_stream() readers get values
            stores[node.store.name].forward_changes = True
            children = [
                c if takes_changes(n) else _values_of(c) for n, c in zip(node.children, children, strict=True)
            ]
        proc.connect(children)
        return proc

    return make(source)


def _aggregate(
    node: AggregateNode, stores: dict[str, TaskStore], ctx: RecordContext, on_late: Callable[[], None]
) -> Processor:
    store = stores[node.store.name]
    if node.subtractor is not None:
        return TableAggregateProcessor(node, store)
    key_serde: Serde[object] = node.store.key_serde
    if isinstance(node.windows, SlidingWindows):
        assert isinstance(key_serde, WindowedSerde) and node.buffer is not None
        buffer = stores[node.buffer.name]
        return SlidingWindowAggregateProcessor(node, store, buffer, ctx, on_late, key_serde.inner)
    if isinstance(node.windows, TimeWindows):
        return TimeWindowAggregateProcessor(node, store, ctx, on_late)
    if isinstance(node.windows, SessionWindows):
        assert isinstance(key_serde, SessionWindowedSerde)
        return SessionAggregateProcessor(node, store, ctx, on_late, key_serde.inner)
    return AggregateProcessor(node, store)


def _values_of(child: Processor) -> Processor:
    """An adapter in front of ``child``: a table's changes in, their new values out."""
    adapter = ToStreamProcessor()
    adapter.connect([child])
    return adapter
