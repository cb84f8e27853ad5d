"""``Topology``: the DSL's entry points (``stream``, ``table``, ``global_table``, ``store``),
``build()``, which validates the graph and splits it into sub-topologies, and the names,
stores and repartition topics the streams and tables ask it for."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from baton.worker.topology.dsl.base import TopologyError
from baton.worker.topology.dsl.stream import Stream
from baton.worker.topology.dsl.table import GlobalTable, Table
from baton.worker.topology.graph import (
    AggregateNode,
    BuiltTopology,
    CustomNode,
    ForeignKeyIndexNode,
    ForeignKeyResultNode,
    GlobalJoinNode,
    GlobalTableNode,
    JoinNode,
    Node,
    SinkNode,
    SourceNode,
    StoreSpec,
    StreamJoinNode,
    SubTopology,
    TableNode,
    looked_up,
    reachable,
)
from baton.worker.topology.serdes import BYTES, JSON, Serde


class Topology:
    """A stream application's processing graph. Build it at import time in the user's module."""

    def __init__(self) -> None:
        self._sources: list[SourceNode] = []
        self._tables: list[TableNode] = []
        self._repartitions: list[str] = []
        self._store_names: set[str] = set()
        self._declared_stores: dict[str, StoreSpec] = {}
        self._table_of: dict[int, TableNode] = {}  # a table's source -> the table
        self._consumer_sized: list[str] = []
        self._globals: list[GlobalTableNode] = []
        self._counter = 0

    # -- entry points -------------------------------------------------------------------
    def stream(
        self,
        topics: str | Iterable[str],
        *,
        key: Serde[Any] = BYTES,
        value: Serde[Any] = BYTES,
        timestamp: Callable[[Any, Any, int], int] | None = None,
    ) -> Stream:
        """Read one or more topics as a record stream.

        ``timestamp(key, value, record_timestamp_ms) -> ms`` is the timestamp extractor
        (Kafka Streams' ``TimestampExtractor``): event time from the payload, for windows
        and as the timestamp of the records produced from it. Without one, the Kafka
        record's timestamp is used. An extractor that raises, or returns a negative time,
        sends the record to the dead-letter topic.
        """
        names = [topics] if isinstance(topics, str) else list(topics)
        if not names:
            raise TopologyError("stream() needs at least one topic")
        node = SourceNode(self._name("source"), names, key, value, timestamp=timestamp)
        self._sources.append(node)
        return Stream(self, node, key, value)

    def table(
        self, topic: str, *, key: Serde[Any] = BYTES, value: Serde[Any] = BYTES, store: str | None = None
    ) -> Table:
        """Read ``topic`` as a table (latest value per key; a null value deletes the key).

        Only looked up by stream-table joins, the topic itself serves as the store's
        changelog (no extra topic) and is followed in the background. Used by table
        operations (``filter``, ``map_values``, ``group_by``, ``to_stream``) or table-table
        joins, its records are processed by the task like a stream's, and its store gets a
        changelog of its own. It must be co-partitioned with what it is joined with.
        """
        spec = self._store(store, "table", key, value, source_topic=topic)
        node = TableNode(self._name("table"), spec, topic)
        self._tables.append(node)
        source = SourceNode(self._name("source"), [topic], key, value)
        source.children.append(node)
        self._sources.append(source)  # only runs if the table turns out to be processed
        self._table_of[id(source)] = node
        return Table(self, node, key, value)

    def global_table(
        self, topic: str, *, key: Serde[Any] = BYTES, value: Serde[Any] = BYTES, store: str | None = None
    ) -> GlobalTable:
        """Read ``topic`` as a global table: every worker holds all of it (Kafka Streams' ``GlobalKTable``).

        Join a stream with it on any key (``stream.join(table, joiner, key=fn)``): no
        co-partitioning, no repartition. Each worker reads the whole topic into a local
        store before it processes anything, then follows it; the store is rebuilt at every
        start (global tables are meant for reference data small enough for that).
        """
        spec = self._store(store, "global", key, value, source_topic=topic)
        node = GlobalTableNode(self._name("global-table"), spec)
        self._globals.append(node)
        return GlobalTable(node, key, value)

    def store(self, name: str, *, key: Serde[Any] = BYTES, value: Serde[Any] = JSON) -> str:
        """Declare a key-value store for custom processors (``stream.process(..., stores=[name])``).

        It has a changelog, ``<application.id>-<name>-changelog``, and restores, standbys and
        exactly-once like the stores of aggregations.
        """
        spec = self._store(name, "store", key, value)
        self._declared_stores[name] = spec
        return name

    # -- build ------------------------------------------------------------------------------
    def build(self) -> BuiltTopology:
        """Validate the graph and split it into sub-topologies (one per connected part)."""
        for table in self._tables:  # a table with consumers of its updates is processed
            table.processed = bool(table.children)
            table.store.source_topic = None if table.processed else table.topic
        owner: dict[int, int] = {}  # a custom processor's store, or a looked-up table -> its sub-topology
        seen_topics: set[str] = set()
        subs = [
            _subtopology(index, sources, owner, seen_topics)
            for index, sources in enumerate(self._connected_sources())
        ]
        self._check_used(subs, owner)
        return BuiltTopology(subs, list(self._repartitions), list(self._consumer_sized), list(self._globals))

    def _connected_sources(self) -> list[list[SourceNode]]:
        """The sources that run, one list per sub-topology: sources that reach a common node, or
        look up its store, share one."""
        active = [s for s in self._sources if id(s) not in self._table_of or self._table_of[id(s)].processed]
        if not active:
            raise TopologyError("the topology reads no topic: call stream() first")
        groups: list[tuple[list[SourceNode], set[int]]] = []
        for source in active:
            nodes = reachable([source])
            sources, ids = [source], {id(n) for n in nodes} | {id(t) for n in nodes for t in looked_up(n)}
            for group in [g for g in groups if g[1] & ids]:
                groups.remove(group)
                sources, ids = [*group[0], *sources], ids | group[1]
            groups.append((sources, ids))
        return [sources for sources, _ids in groups]

    def _check_used(self, subs: list[SubTopology], owner: dict[int, int]) -> None:
        """Every declared store, table and global table is used by some sub-topology."""
        for name, spec in self._declared_stores.items():
            if id(spec) not in owner:
                raise TopologyError(f"store {name!r} is declared but no processor uses it")
        for table in self._tables:
            if id(table) not in owner and not table.processed:
                raise TopologyError(
                    f"table {table.store.name!r} is never used: join it, or call one of its operations"
                )
        joined = {
            id(n.table) for sub in subs for n in reachable(list(sub.sources)) if isinstance(n, GlobalJoinNode)
        }
        for global_table in self._globals:
            if id(global_table) not in joined:
                raise TopologyError(f"global table {global_table.store.name!r} is never joined")

    # -- helpers used by Stream and friends -------------------------------------------------
    def _name(self, kind: str) -> str:
        self._counter += 1
        return f"{kind}-{self._counter:04d}"

    def _store(
        self,
        name: str | None,
        kind: str,
        key: Serde[Any],
        value: Serde[Any],
        source_topic: str | None = None,
    ) -> StoreSpec:
        store_name = name or self._name(f"{kind}-store")
        if store_name in self._store_names:
            raise TopologyError(
                f"two stores are named {store_name!r}: give each its own store= name (or none, for a generated one)"
            )
        self._store_names.add(store_name)
        return StoreSpec(store_name, key, value, source_topic)

    def _repartition(
        self,
        upstream: Node,
        key: Serde[Any],
        value: Serde[Any],
        name: str | None,
        consumer_sized: bool = False,
    ) -> SourceNode:
        """An internal topic from ``upstream`` to a new source; sized like its writer, or its
        reader (``consumer_sized``: the foreign-key join's topics, co-partitioned with a table)."""
        suffix = f"{name or self._name('repartition')}-repartition"
        sink = SinkNode(self._name("sink"), suffix, key, value, internal=True)
        upstream.children.append(sink)
        self._repartitions.append(suffix)
        if consumer_sized:
            self._consumer_sized.append(suffix)
        source = SourceNode(self._name("source"), [suffix], key, value, internal=True)
        self._sources.append(source)
        return source


def _subtopology(
    index: int, sources: list[SourceNode], owner: dict[int, int], seen_topics: set[str]
) -> SubTopology:
    """Sub-topology ``index`` of ``build()``: its sources, the stores it keeps, and the tables it
    looks up; a topic, a custom processor's store or a looked-up table belongs to one only."""
    nodes = reachable(list(sources))
    for topic in (t for s in sources for t in s.topics):
        if topic in seen_topics:
            raise TopologyError(
                f"topic {topic!r} is read by two streams; read it once and use that stream for both"
            )
        seen_topics.add(topic)
    stores = _stores_kept(nodes)
    for spec in (spec for n in nodes if isinstance(n, CustomNode) for spec in n.stores):
        clash = (
            f"store {spec.name!r} is used by processors of two sub-topologies "
            "(their tasks would not share it): use it after one grouping only"
        )
        if _claim(owner, spec, index, clash):
            stores.append(spec)
    tables: list[TableNode] = []
    for n in nodes:
        if isinstance(n, JoinNode) and isinstance(n.table, TableNode) and not n.table.processed:
            clash = f"table {n.table.store.name!r} is joined from two sub-topologies"
            if _claim(owner, n.table, index, clash):
                tables.append(n.table)
    custom = any(isinstance(n, CustomNode) for n in nodes)
    return SubTopology(index, sources, stores, tables, custom)


def _stores_kept(nodes: list[Node]) -> list[StoreSpec]:
    """The stores of ``nodes`` that their sub-topology keeps, but custom processors' (declared
    on the topology, and claimed by one sub-topology)."""
    stores = [
        n.store
        for n in nodes
        if isinstance(n, AggregateNode | ForeignKeyResultNode | ForeignKeyIndexNode)
        or (isinstance(n, TableNode) and n.processed)
    ]
    stores += [n.buffer for n in nodes if isinstance(n, AggregateNode) and n.buffer is not None]
    stores += [s for n in nodes if isinstance(n, StreamJoinNode) for s in (n.left_store, n.right_store)]
    return stores


def _claim(owner: dict[int, int], thing: object, index: int, clash: str) -> bool:
    """Give ``thing`` to sub-topology ``index``: True if it is new there, False if that one has it
    already; ``TopologyError(clash)`` if another one has it."""
    held = owner.get(id(thing))
    if held is None:
        owner[id(thing)] = index
        return True
    if held != index:
        raise TopologyError(clash)
    return False
