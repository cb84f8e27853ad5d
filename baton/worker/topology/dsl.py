"""The topology DSL: Kafka Streams' shape, Python's manners.

    topology = Topology()
    (topology.stream("clicks", key=STR, value=JSON)
        .group_by_key()
        .count(store="user-counts")
        .to_stream()
        .to("user_counts", value=JSON))

Each call appends a node to an inert graph (``graph.py``); nothing touches Kafka until a
worker runs the built topology. Serdes flow along the stream: an operation keeps the
serdes it was given unless told otherwise, so ``to(topic)`` usually needs none.
Operations that may change the key (``map``, ``flat_map``, ``group_by``) mark the stream,
and a later grouping goes through a repartition topic so that equal keys meet in one
task, as in Kafka Streams.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from baton.worker.topology.custom import Processor
from baton.worker.topology.graph import (
    AggregateNode,
    BuiltTopology,
    CustomNode,
    FilterNode,
    FlatMapNode,
    JoinNode,
    MapNode,
    MapValuesNode,
    Node,
    PeekNode,
    SinkNode,
    SourceNode,
    StoreSpec,
    StreamJoinNode,
    StreamJoinSideNode,
    SubTopology,
    TableNode,
    reachable,
)
from baton.worker.topology.serdes import BYTES, JSON, Serde
from baton.worker.topology.windows import (
    JoinWindows,
    SessionWindowedSerde,
    SessionWindows,
    TimeWindows,
    WindowedSerde,
)


class TopologyError(ValueError):
    """The topology cannot run as written (the message says why)."""


class Topology:
    """A stream application's processing graph. Build it at import time in the user's module."""

    def __init__(self) -> None:
        self._sources: list[SourceNode] = []
        self._tables: list[TableNode] = []
        self._repartitions: list[str] = []
        self._store_names: set[str] = set()
        self._declared_stores: dict[str, StoreSpec] = {}
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

        The topic itself serves as the store's changelog, so no extra topic is created.
        It must be co-partitioned with the streams joined against it.
        """
        spec = self._store(store, "table", key, value, source_topic=topic)
        node = TableNode(self._name("table"), spec)
        self._tables.append(node)
        return Table(self, node, key, value)

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
        if not self._sources:
            raise TopologyError("the topology reads no topic: call stream() first")
        groups: list[tuple[list[SourceNode], set[int]]] = []
        for source in self._sources:  # sources that reach a common node share a sub-topology
            sources, ids = [source], {id(n) for n in reachable([source])}
            for group in [g for g in groups if g[1] & ids]:
                groups.remove(group)
                sources, ids = [*group[0], *sources], ids | group[1]
            groups.append((sources, ids))
        subs: list[SubTopology] = []
        owner: dict[int, int] = {}
        seen_topics: set[str] = set()
        for index, (sources, _ids) in enumerate(groups):
            nodes = reachable(list(sources))
            for topic in (t for s in sources for t in s.topics):
                if topic in seen_topics:
                    raise TopologyError(f"topic {topic!r} is read by two streams; read it once and branch")
                seen_topics.add(topic)
            stores = [n.store for n in nodes if isinstance(n, AggregateNode)]
            stores += [
                s for n in nodes if isinstance(n, StreamJoinNode) for s in (n.left_store, n.right_store)
            ]
            for n in nodes:
                if isinstance(n, CustomNode):
                    for spec in n.stores:
                        if id(spec) in owner and owner[id(spec)] != index:
                            raise TopologyError(
                                f"store {spec.name!r} is used by processors of two sub-topologies "
                                "(their tasks would not share it): use it after one grouping only"
                            )
                        if id(spec) not in owner:
                            owner[id(spec)] = index
                            stores.append(spec)
            tables = []
            for n in nodes:
                if isinstance(n, JoinNode):
                    if id(n.table) in owner and owner[id(n.table)] != index:
                        raise TopologyError(f"table {n.table.store.name!r} is joined from two sub-topologies")
                    if id(n.table) not in owner:
                        owner[id(n.table)] = index
                        tables.append(n.table)
            custom = any(isinstance(n, CustomNode) for n in nodes)
            subs.append(SubTopology(index, sources, stores, tables, custom))
        for name, spec in self._declared_stores.items():
            if id(spec) not in owner:
                raise TopologyError(f"store {name!r} is declared but no processor uses it")
        for table in self._tables:
            if id(table) not in owner:
                raise TopologyError(f"table {table.store.name!r} is never joined; tables are join inputs")
        return BuiltTopology(subs, list(self._repartitions))

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
            raise TopologyError(f"two stores are named {store_name!r}")
        self._store_names.add(store_name)
        return StoreSpec(store_name, key, value, source_topic)

    def _repartition(
        self, upstream: Node, key: Serde[Any], value: Serde[Any], name: str | None
    ) -> SourceNode:
        suffix = f"{name or self._name('repartition')}-repartition"
        sink = SinkNode(self._name("sink"), suffix, key, value, internal=True)
        upstream.children.append(sink)
        self._repartitions.append(suffix)
        source = SourceNode(self._name("source"), [suffix], key, value, internal=True)
        self._sources.append(source)
        return source


class Stream:
    """A record stream (Kafka Streams' ``KStream``)."""

    def __init__(
        self, topology: Topology, node: Node, key: Serde[Any], value: Serde[Any], key_changed: bool = False
    ) -> None:
        self._topology = topology
        self._node = node
        self.key_serde = key
        self.value_serde = value
        self._key_changed = key_changed

    def _then(
        self, node: Node, *, value: Serde[Any] | None = None, key_changed: bool | None = None
    ) -> Stream:
        self._node.children.append(node)
        changed = self._key_changed if key_changed is None else key_changed
        return Stream(self._topology, node, self.key_serde, value or self.value_serde, changed)

    def filter(self, predicate: Callable[[Any, Any], bool]) -> Stream:
        """Keep records for which ``predicate(key, value)`` is true."""
        return self._then(FilterNode(self._topology._name("filter"), predicate))

    def filter_not(self, predicate: Callable[[Any, Any], bool]) -> Stream:
        return self.filter(lambda k, v: not predicate(k, v))

    def map(
        self,
        fn: Callable[[Any, Any], tuple[Any, Any]],
        *,
        key: Serde[Any] | None = None,
        value: Serde[Any] | None = None,
    ) -> Stream:
        """``fn(key, value) -> (new_key, new_value)``. A later grouping repartitions."""
        out = self._then(MapNode(self._topology._name("map"), fn), value=value, key_changed=True)
        out.key_serde = key or self.key_serde
        return out

    def map_values(self, fn: Callable[[Any], Any], *, value: Serde[Any] | None = None) -> Stream:
        """``fn(value) -> new_value``; the key is untouched, so no repartition is needed."""
        return self._then(MapValuesNode(self._topology._name("map-values"), fn), value=value)

    def flat_map(
        self,
        fn: Callable[[Any, Any], Iterable[tuple[Any, Any]]],
        *,
        key: Serde[Any] | None = None,
        value: Serde[Any] | None = None,
    ) -> Stream:
        """``fn(key, value) -> iterable of (key, value)``: zero or more records per input."""
        out = self._then(FlatMapNode(self._topology._name("flat-map"), fn), value=value, key_changed=True)
        out.key_serde = key or self.key_serde
        return out

    def flat_map_values(
        self, fn: Callable[[Any], Iterable[Any]], *, value: Serde[Any] | None = None
    ) -> Stream:
        node = FlatMapNode(self._topology._name("flat-map-values"), lambda k, v: ((k, x) for x in fn(v)))
        return self._then(node, value=value)

    def peek(self, fn: Callable[[Any, Any], None]) -> Stream:
        """Call ``fn(key, value)`` for its side effect and pass the record on."""
        return self._then(PeekNode(self._topology._name("peek"), fn))

    def to(self, topic: str, *, key: Serde[Any] | None = None, value: Serde[Any] | None = None) -> None:
        """Write the stream to ``topic`` (through the sink gate, see ``sink.py``)."""
        self._node.children.append(
            SinkNode(self._topology._name("sink"), topic, key or self.key_serde, value or self.value_serde)
        )

    def process(
        self,
        factory: Callable[[], Processor],
        *,
        stores: Iterable[str] = (),
        key: Serde[Any] | None = None,
        value: Serde[Any] | None = None,
    ) -> Stream:
        """Run a custom processor (``baton.Processor``) with the stores it names; returns what it forwards.

        A processor may forward other keys, so a grouping after it repartitions.
        """
        specs = []
        for name in stores:
            spec = self._topology._declared_stores.get(name)
            if spec is None:
                raise TopologyError(f"process() names store {name!r}: declare it first with topology.store()")
            specs.append(spec)
        node = CustomNode(self._topology._name("process"), factory, specs)
        out = self._then(node, value=value, key_changed=True)
        out.key_serde = key or self.key_serde
        return out

    def group_by_key(
        self, *, key: Serde[Any] | None = None, value: Serde[Any] | None = None, name: str | None = None
    ) -> GroupedStream:
        """Group by the current key; repartitions only if an upstream step may have changed it."""
        k, v = key or self.key_serde, value or self.value_serde
        node: Node = self._node
        if self._key_changed:
            node = self._topology._repartition(self._node, k, v, name)
        return GroupedStream(self._topology, node, k, v)

    def group_by(
        self,
        selector: Callable[[Any, Any], Any],
        *,
        key: Serde[Any] | None = None,
        value: Serde[Any] | None = None,
        name: str | None = None,
    ) -> GroupedStream:
        """Group by ``selector(key, value)`` (always through a repartition topic)."""
        mapped = self.map(lambda k, v: (selector(k, v), v), key=key, value=value)
        return mapped.group_by_key(name=name)

    def join(
        self,
        other: Table | Stream,
        joiner: Callable[[Any, Any], Any],
        *,
        windows: JoinWindows | None = None,
        value: Serde[Any] | None = None,
        name: str | None = None,
    ) -> Stream:
        """Inner join: ``joiner(value, other_value)``.

        With a table: for keys present in the table. With a stream: for records of equal
        keys at most ``windows`` apart in time (``within(...)``), Kafka Streams' KStream-KStream join.
        """
        if isinstance(other, Stream):
            return self._join_stream(other, joiner, windows, value, "inner", name)
        return self._join(other, joiner, value, left=False)

    def left_join(
        self,
        other: Table | Stream,
        joiner: Callable[[Any, Any], Any],
        *,
        windows: JoinWindows | None = None,
        value: Serde[Any] | None = None,
        name: str | None = None,
    ) -> Stream:
        """Like :meth:`join` but keeps every record of this side; the other value is None without a match.

        Against a stream, the unmatched record is emitted once its window has closed.
        """
        if isinstance(other, Stream):
            return self._join_stream(other, joiner, windows, value, "left", name)
        return self._join(other, joiner, value, left=True)

    def outer_join(
        self,
        other: Stream,
        joiner: Callable[[Any, Any], Any],
        *,
        windows: JoinWindows,
        value: Serde[Any] | None = None,
        name: str | None = None,
    ) -> Stream:
        """Stream-stream join keeping unmatched records of both sides (``None`` for the missing one)."""
        return self._join_stream(other, joiner, windows, value, "outer", name)

    def _join_stream(  # noqa: PLR0917 - the join's parts
        self,
        other: Stream,
        joiner: Callable[[Any, Any], Any],
        windows: JoinWindows | None,
        value: Serde[Any] | None,
        how: str,
        name: str | None,
    ) -> Stream:
        if windows is None:
            raise TopologyError(
                "a stream-stream join needs windows=within(...): how far apart records may be"
            )
        if self._key_changed or other._key_changed:
            raise TopologyError("the key may have changed before this join: group or repartition first")
        t = self._topology
        base = name or t._name("join")
        left_store = t._store(f"{base}-this", "join", self.key_serde, BYTES)
        right_store = t._store(f"{base}-other", "join", other.key_serde, BYTES)
        node = StreamJoinNode(
            t._name("stream-join"),
            joiner,
            windows,
            how,
            left_store,
            right_store,
            (self.value_serde, other.value_serde),
        )
        for side, left in ((self, True), (other, False)):
            entry = StreamJoinSideNode(t._name("join-side"), node, left, side.key_serde)
            entry.children.append(node)
            side._node.children.append(entry)
        return Stream(t, node, self.key_serde, value or self.value_serde)

    def _join(
        self, table: Table, joiner: Callable[[Any, Any], Any], value: Serde[Any] | None, left: bool
    ) -> Stream:
        if not isinstance(table._node, TableNode):
            raise TopologyError("join() takes a table made by Topology.table(topic)")
        if self._key_changed:
            raise TopologyError("the key may have changed before this join: group or repartition first")
        node = JoinNode(self._topology._name("join"), table._node, joiner, left)
        return self._then(node, value=value)


class GroupedStream:
    """Records grouped by key, ready to aggregate (``KGroupedStream``)."""

    def __init__(
        self,
        topology: Topology,
        node: Node,
        key: Serde[Any],
        value: Serde[Any],
        windows: TimeWindows | SessionWindows | None = None,
    ) -> None:
        self._topology = topology
        self._node = node
        self.key_serde = key
        self.value_serde = value
        self._windows = windows

    def windowed_by(self, windows: TimeWindows | SessionWindows) -> GroupedStream:
        """Aggregate per key and window: ``tumbling(...)``, ``hopping(...)`` or ``sessions(...)``."""
        if not isinstance(windows, TimeWindows | SessionWindows):
            raise TopologyError("windowed_by() takes tumbling(...), hopping(...) or sessions(...)")
        return GroupedStream(self._topology, self._node, self.key_serde, self.value_serde, windows)

    def count(self, *, store: str | None = None) -> Table:
        """Number of records per key (per window if windowed)."""
        return self.aggregate(
            lambda: 0, lambda _k, _v, n: n + 1, store=store, value=JSON, merger=lambda _k, a, b: a + b
        )

    def reduce(
        self, reducer: Callable[[Any, Any], Any], *, store: str | None = None, value: Serde[Any] | None = None
    ) -> Table:
        """Combine values per key: ``reducer(current, value)``; the first value starts the fold."""
        missing = object()

        def aggregator(_key: Any, new: Any, current: Any) -> Any:
            return new if current is missing else reducer(current, new)

        return self.aggregate(
            lambda: missing,
            aggregator,
            store=store,
            value=value or self.value_serde,
            merger=lambda _k, a, b: reducer(a, b),
        )

    def aggregate(
        self,
        initializer: Callable[[], Any],
        aggregator: Callable[[Any, Any, Any], Any],
        *,
        store: str | None = None,
        value: Serde[Any] = JSON,
        merger: Callable[[Any, Any, Any], Any] | None = None,
    ) -> Table:
        """Fold values per key: ``aggregator(key, value, current) -> new``, starting at ``initializer()``.

        Session windows also need ``merger(key, older, newer) -> merged``: a record that
        falls between two sessions of a key joins them into one.
        """
        key: Serde[Any] = self.key_serde
        if isinstance(self._windows, TimeWindows):
            key = WindowedSerde(self.key_serde, self._windows.size_ms)
        elif isinstance(self._windows, SessionWindows):
            if merger is None:
                raise TopologyError(
                    "aggregate() over session windows needs merger=(key, older, newer) -> merged"
                )
            key = SessionWindowedSerde(self.key_serde)
        spec = self._topology._store(store, "aggregate", key, value)
        node = AggregateNode(
            self._topology._name("aggregate"), spec, initializer, aggregator, self._windows, merger
        )
        self._node.children.append(node)
        return Table(self._topology, node, key, value)


class Suppressed:
    """What ``Table.suppress`` waits for; made by ``until_window_closes()``."""

    __slots__ = ()


def until_window_closes() -> Suppressed:
    """Final results only: Kafka Streams' ``Suppressed.untilWindowCloses(unbounded())``.

    Unbounded because the results wait in the store itself (RocksDB, with its changelog),
    not in a memory buffer, so there is no buffer to overflow.
    """
    return Suppressed()


class Table:
    """A changelog stream seen as its latest value per key (``KTable``)."""

    def __init__(self, topology: Topology, node: Node, key: Serde[Any], value: Serde[Any]) -> None:
        self._topology = topology
        self._node = node
        self.key_serde = key
        self.value_serde = value

    @property
    def store_name(self) -> str:
        assert isinstance(self._node, AggregateNode | TableNode)
        return self._node.store.name

    def suppress(self, until: Suppressed) -> Table:
        """Emit only final results: each window's last value once, when the window closes.

        Kafka Streams' ``suppress(Suppressed.untilWindowCloses(...))``. A window closes when
        stream time passes its end plus the grace period (sessions: plus the gap too), so
        results wait that long, and a late record never amends one already emitted. Call
        it before ``to_stream()``: it changes what this table forwards.
        """
        if not isinstance(until, Suppressed):
            raise TopologyError("suppress() takes until_window_closes()")
        node = self._node
        if not isinstance(node, AggregateNode) or node.windows is None:
            raise TopologyError("suppress(until_window_closes()) needs a windowed aggregation")
        if node.children:
            raise TopologyError("call suppress() before to_stream(): the table already has consumers")
        node.final = True
        return Table(self._topology, node, self.key_serde, self.value_serde)

    def to_stream(self) -> Stream:
        """The table's updates as a stream (one record per update, or per commit with the cache)."""
        if isinstance(self._node, TableNode):
            raise TopologyError("a table read from a topic is a join input; use stream(topic) to read it")
        return Stream(self._topology, self._node, self.key_serde, self.value_serde)
