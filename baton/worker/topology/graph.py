"""The logical topology: nodes the DSL records, and how they split into sub-topologies.

These are plain data. The DSL (``dsl.py``) builds them, ``build()`` validates them and
groups them into sub-topologies, and the runtime (``runtime/tree.py``, from each processor
family's ``{node type: factory}`` table) turns one sub-topology into the per-task processor
tree. Keeping the graph inert lets unit tests check its shape without Kafka, and lets the
operator reason about it (e.g. "has a repartition step").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from baton.worker.topology.serdes import Serde
from baton.worker.topology.windows import JoinWindows, SessionWindows, SlidingWindows, TimeWindows


@dataclass(eq=False)
class Node:
    """A step of the topology. ``children`` receive what it forwards."""

    name: str
    children: list[Node] = field(default_factory=list, init=False, repr=False)


@dataclass(eq=False)
class SourceNode(Node):
    """Records of ``topics`` enter here, consumed through the application's consumer group."""

    topics: list[str]
    key_serde: Serde[Any]
    value_serde: Serde[Any]
    internal: bool = False  # a repartition topic: its name gets the application id prefix
    # event time from the record: (key, value, record timestamp ms) -> timestamp ms
    timestamp: Callable[[Any, Any, int], int] | None = None


@dataclass(eq=False)
class FilterNode(Node):
    predicate: Callable[[Any, Any], bool]


@dataclass(eq=False)
class MapNode(Node):
    """``fn(key, value) -> (key, value)``; changes the key, so grouping needs a repartition."""

    fn: Callable[[Any, Any], tuple[Any, Any]]


@dataclass(eq=False)
class SelectKeyNode(Node):
    """``selector(key, value) -> new key``, the value kept (Kafka Streams' ``selectKey``): a
    ``map`` that says it leaves the value, so no step has to build and unpack a pair for it."""

    selector: Callable[[Any, Any], Any]


@dataclass(eq=False)
class MapValuesNode(Node):
    fn: Callable[[Any], Any]


@dataclass(eq=False)
class FlatMapNode(Node):
    """``fn(key, value) -> iterable of (key, value)``."""

    fn: Callable[[Any, Any], Any]


@dataclass(eq=False)
class PeekNode(Node):
    fn: Callable[[Any, Any], None]


@dataclass(eq=False)
class BranchNode(Node):
    """``split()``: each record goes to the child of the first predicate it satisfies, or nowhere.

    ``predicates[i]`` guards ``children[i]``; None (the default branch) takes every record
    that reached it. Kafka Streams' ``KStreamBranch``: branches are exclusive, in order.
    """

    predicates: list[Callable[[Any, Any], bool] | None] = field(default_factory=list)


@dataclass(eq=False)
class PassThroughNode(Node):
    """Forwards what it receives: a branch of ``split()``."""


@dataclass(eq=False)
class MergeNode(PassThroughNode):
    """``merge()``: a child of both merged streams, which puts their sources in one
    sub-topology (``Topology.build`` groups sources reaching a common node)."""


@dataclass(eq=False)
class SinkNode(Node):
    topic: str
    key_serde: Serde[Any]
    value_serde: Serde[Any]
    internal: bool = False  # a repartition topic: name gets the application id prefix


@dataclass(eq=False)
class StoreSpec:
    """A state store of a sub-topology. ``source_topic`` set means the topic is its changelog."""

    name: str
    key_serde: Serde[Any]
    value_serde: Serde[Any]
    source_topic: str | None = None


@dataclass(eq=False)
class AggregateNode(Node):
    """count/reduce/aggregate, optionally windowed: ``aggregator(key, value, current) -> new``.

    ``merger(key, a, b)`` combines two sessions' aggregates when a record bridges them
    (session windows only). ``final`` is ``suppress(until_window_closes())``: only a
    closed window's last value goes downstream.
    """

    store: StoreSpec
    initializer: Callable[[], Any]
    aggregator: Callable[[Any, Any, Any], Any]
    windows: TimeWindows | SessionWindows | SlidingWindows | None = None
    merger: Callable[[Any, Any, Any], Any] | None = None
    final: bool = False
    # sliding windows: the key's records within reach, which new windows are folded from
    buffer: StoreSpec | None = None
    # a grouped table's aggregation: records are ``Adjust(old, new)``, ``old`` is taken out
    # with ``subtractor(key, old, current)`` before ``new`` goes in with ``aggregator``
    subtractor: Callable[[Any, Any, Any], Any] | None = None


@dataclass(eq=False)
class TableNode(Node):
    """A table read from ``topic``.

    Only looked up by stream-table joins, it is *tailed*: the topic is the store's
    changelog, followed in the background (``store.source_topic``). With consumers of its
    updates (table operations, table-table and foreign-key joins) ``build()`` makes it
    *processed*: the topic becomes a source of the task, each record updates the store
    (which then has a changelog of its own, as Kafka Streams' default) and goes on as a
    ``Change(new, old)``.
    """

    store: StoreSpec
    topic: str = ""
    processed: bool = False


@dataclass(eq=False)
class TableFilterNode(Node):
    """``Table.filter``: a derived table; rows failing ``predicate`` read as absent."""

    parent: Node
    predicate: Callable[[Any, Any], bool]


@dataclass(eq=False)
class TableMapValuesNode(Node):
    """``Table.map_values``: a derived table of ``fn(value)``."""

    parent: Node
    fn: Callable[[Any], Any]


@dataclass(eq=False)
class ToStreamNode(Node):
    """A table's updates as a stream: ``Change(new, old)`` becomes ``new`` (None: a deletion)."""


@dataclass(eq=False)
class TableGroupByNode(Node):
    """``Table.group_by``: ``selector(key, value) -> (group, value)``; sends ``Adjust`` records."""

    selector: Callable[[Any, Any], tuple[Any, Any]]


@dataclass(eq=False)
class TableJoinNode(Node):
    """A table-table join on the primary key (``how``: inner, left, outer); its result is a table."""

    joiner: Callable[[Any, Any], Any]
    how: str
    left: Node
    right: Node


@dataclass(eq=False)
class TableJoinSideNode(Node):
    """One input of a table-table join (its only child is the join)."""

    join: TableJoinNode
    left: bool


@dataclass(eq=False)
class ForeignKeyResultNode(Node):
    """The result of a foreign-key join, kept in ``store``, on the left table's side.

    It receives the right side's responses (``response`` topic) and keeps those that still
    match the left row they were asked for (by a hash of its value).
    """

    store: StoreSpec
    left: Node
    joiner: Callable[[Any, Any], Any]
    how: str
    left_key: Serde[Any]
    left_value: Serde[Any]
    right_value: Serde[Any]


@dataclass(eq=False)
class ForeignKeySubscribeNode(Node):
    """Left side: each left row (un)subscribes to the right row its foreign key names."""

    foreign_key: Callable[[Any], Any]
    result: ForeignKeyResultNode


@dataclass(eq=False)
class ForeignKeyIndexNode(Node):
    """Right side: who subscribed to each right key (``store``); answers with right values.

    Fed by the subscription topic and by the right table's updates (two side nodes).
    """

    store: StoreSpec
    right: Node
    right_key: Serde[Any]
    right_value: Serde[Any]


@dataclass(eq=False)
class ForeignKeyIndexSideNode(Node):
    """An input of ``ForeignKeyIndexNode``: a subscription record or a right table update."""

    index: ForeignKeyIndexNode
    registration: bool


def looked_up(node: Node) -> list[Node]:
    """The table nodes whose stores ``node`` reads: they must run in the same task."""
    if isinstance(node, JoinNode):
        return [node.table]
    if isinstance(node, TableJoinNode):
        return [node.left, node.right]
    if isinstance(node, ForeignKeyResultNode):
        return [node.left]
    if isinstance(node, ForeignKeyIndexNode):
        return [node.right]
    return []


def emits_changes(node: Node) -> bool:
    """Does this node forward ``Change(new, old)`` (a table's updates) rather than plain values?"""
    return isinstance(
        node,
        TableNode | TableFilterNode | TableMapValuesNode | TableJoinNode | ForeignKeyResultNode,
    )


def takes_changes(node: Node) -> bool:
    """Does this node consume a table's ``Change`` updates?"""
    return isinstance(
        node,
        TableFilterNode
        | TableMapValuesNode
        | ToStreamNode
        | TableGroupByNode
        | TableJoinSideNode
        | ForeignKeySubscribeNode,
    ) or (isinstance(node, ForeignKeyIndexSideNode) and not node.registration)


@dataclass(eq=False)
class JoinNode(Node):
    """Stream-table join: looks the stream key up in ``table``; ``left`` keeps misses (table value None).

    ``table`` is a ``TableNode`` or a table derived from one (its value is computed on lookup).
    """

    table: Node
    joiner: Callable[[Any, Any], Any]
    left: bool


@dataclass(eq=False)
class GlobalTableNode(Node):
    """A table every worker holds whole (all partitions of ``store.source_topic``), kept apart
    from tasks: no co-partitioning, looked up by any key a stream record yields."""

    store: StoreSpec


@dataclass(eq=False)
class GlobalJoinNode(Node):
    """Stream-global table join: looks ``key(key, value)`` up in ``table``; ``left`` keeps misses."""

    table: GlobalTableNode
    key: Callable[[Any, Any], Any]
    joiner: Callable[[Any, Any], Any]
    left: bool


@dataclass(eq=False)
class StreamJoinNode(Node):
    """A windowed stream-stream join's output: ``joiner(left, right)`` for records within ``windows``.

    ``how`` is inner, left or outer. Each side buffers its records in its own store until
    they leave the window; the two ``StreamJoinSideNode`` feed it.
    """

    joiner: Callable[[Any, Any], Any]
    windows: JoinWindows
    how: str
    left_store: StoreSpec
    right_store: StoreSpec
    value_serdes: tuple[Serde[Any], Serde[Any]]  # each side's values (the stores hold bytes)


@dataclass(eq=False)
class StreamJoinSideNode(Node):
    """One input of a stream-stream join (its only child is the join)."""

    join: StreamJoinNode
    left: bool
    key_serde: Serde[Any]


@dataclass(eq=False)
class CustomNode(Node):
    """A user's processor (``stream.process``): ``factory()`` makes one per task."""

    factory: Callable[[], Any]
    stores: list[StoreSpec]


@dataclass(eq=False)
class SubTopology:
    """Nodes connected without a repartition topic: one task per partition of its sources."""

    index: int
    sources: list[SourceNode]
    stores: list[StoreSpec]
    tables: list[TableNode]
    custom: bool = False  # has a custom processor: the task keeps and commits its stream time

    @property
    def source_topics(self) -> list[str]:
        return [t for s in self.sources for t in s.topics]


@dataclass(eq=False)
class BuiltTopology:
    """A validated topology: what a worker runs. Internal topic names still lack the app id."""

    subtopologies: list[SubTopology]
    repartition_topics: list[str]  # suffixes: full name is f"{application_id}-{suffix}"
    # repartition suffixes sized like the sub-topology that reads them (foreign-key joins)
    consumer_sized: list[str] = field(default_factory=list)
    global_tables: list[GlobalTableNode] = field(default_factory=list)

    def stores(self) -> list[StoreSpec]:
        return [s for sub in self.subtopologies for s in sub.stores]

    def input_topics(self) -> list[str]:
        """The topics the application reads but does not create (streams, tables, global tables):
        they must exist before a worker starts."""
        topics = [t for sub in self.subtopologies for s in sub.sources if not s.internal for t in s.topics]
        topics += [
            t.store.source_topic for sub in self.subtopologies for t in sub.tables if t.store.source_topic
        ]
        topics += [g.store.source_topic for g in self.global_tables if g.store.source_topic]
        return list(dict.fromkeys(topics))

    def describe(self) -> str:
        """A human-readable outline, like Kafka Streams' ``TopologyDescription``."""
        lines: list[str] = []

        def walk(node: Node, depth: int, seen: set[int]) -> None:
            if id(node) in seen:
                return
            seen.add(id(node))
            topics = (
                f" (topics: {', '.join(node.topics)})"
                if isinstance(node, SourceNode)
                else f" (topic: {node.topic})"
                if isinstance(node, SinkNode)
                else ""
            )
            lines.append("  " * depth + f"{type(node).__name__.removesuffix('Node')}: {node.name}{topics}")
            for child in node.children:
                walk(child, depth + 1, seen)

        for sub in self.subtopologies:
            lines.append(f"Sub-topology {sub.index}")
            seen: set[int] = set()
            for src in sub.sources:
                walk(src, 1, seen)
        return "\n".join(lines)


def reachable(starts: list[Node]) -> list[Node]:
    """Every node reachable from ``starts`` (stopping at sinks), in discovery order."""
    seen: dict[int, Node] = {}
    stack = list(starts)
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen[id(node)] = node
        stack.extend(node.children)
    return list(seen.values())
