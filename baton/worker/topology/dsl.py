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

Over 600 lines on purpose: this is the whole user-facing DSL, and its classes (``Topology``,
``Stream``, ``Table``, their grouped forms) return one another from nearly every method, so
split modules would import each other in a circle. What is not DSL surface lives apart:
the graph (``graph.py``), windows, serdes, changes, custom processors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from baton.worker.topology.changes import AdjustSerde
from baton.worker.topology.custom import Processor
from baton.worker.topology.graph import (
    AggregateNode,
    BranchNode,
    BuiltTopology,
    CustomNode,
    FilterNode,
    FlatMapNode,
    ForeignKeyIndexNode,
    ForeignKeyIndexSideNode,
    ForeignKeyResultNode,
    ForeignKeySubscribeNode,
    GlobalJoinNode,
    GlobalTableNode,
    JoinNode,
    MapNode,
    MapValuesNode,
    MergeNode,
    Node,
    PassThroughNode,
    PeekNode,
    SinkNode,
    SourceNode,
    StoreSpec,
    StreamJoinNode,
    StreamJoinSideNode,
    SubTopology,
    TableFilterNode,
    TableGroupByNode,
    TableJoinNode,
    TableJoinSideNode,
    TableMapValuesNode,
    TableNode,
    ToStreamNode,
    emits_changes,
    looked_up,
    reachable,
)
from baton.worker.topology.serdes import BYTES, JSON, Serde
from baton.worker.topology.windows import (
    JoinWindows,
    SessionWindowedSerde,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    WindowedSerde,
)

Joiner = Callable[[Any, Any], Any]  # (this side's value, the other's) -> the joined value


class StreamJoinOptions(TypedDict, total=False):
    """The keywords of ``Stream.join`` and ``Stream.left_join``, named once for both."""

    windows: JoinWindows | None  # with a stream: how far apart joined records may be
    key: Callable[[Any, Any], Any] | None  # with a global table: the lookup key
    value: Serde[Any] | None
    name: str | None


class TableJoinOptions(TypedDict, total=False):
    """The keywords of ``Table.join`` and ``Table.left_join``, named once for both."""

    foreign_key: Callable[[Any], Any] | None
    value: Serde[Any] | None
    name: str | None


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
        active = [s for s in self._sources if id(s) not in self._table_of or self._table_of[id(s)].processed]
        if not active:
            raise TopologyError("the topology reads no topic: call stream() first")
        groups: list[tuple[list[SourceNode], set[int]]] = []
        for source in active:  # sources that reach a common node, or look up its store, share a sub-topology
            nodes = reachable([source])
            sources, ids = [source], {id(n) for n in nodes} | {id(t) for n in nodes for t in looked_up(n)}
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
                    raise TopologyError(
                        f"topic {topic!r} is read by two streams; read it once and use that stream for both"
                    )
                seen_topics.add(topic)
            stores = [
                n.store
                for n in nodes
                if isinstance(n, AggregateNode | ForeignKeyResultNode | ForeignKeyIndexNode)
                or (isinstance(n, TableNode) and n.processed)
            ]
            stores += [n.buffer for n in nodes if isinstance(n, AggregateNode) and n.buffer is not None]
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
                if isinstance(n, JoinNode) and isinstance(n.table, TableNode) and not n.table.processed:
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
        return BuiltTopology(subs, list(self._repartitions), list(self._consumer_sized), list(self._globals))

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


class _Handle:
    """What a stream, a table and their grouped forms hold: the topology, the node the next
    operation hangs below, and the serdes that flow along (written once for all four)."""

    def __init__(self, topology: Topology, node: Node, key: Serde[Any], value: Serde[Any]) -> None:
        self._topology = topology
        self._node = node
        self.key_serde = key
        self.value_serde = value


class Stream(_Handle):
    """A record stream (Kafka Streams' ``KStream``)."""

    def __init__(
        self, topology: Topology, node: Node, key: Serde[Any], value: Serde[Any], key_changed: bool = False
    ) -> None:
        super().__init__(topology, node, key, value)
        self._key_changed = key_changed

    def _then(
        self, node: Node, *, value: Serde[Any] | None = None, key_changed: bool | None = None
    ) -> Stream:
        self._node.children.append(node)
        changed = self._key_changed if key_changed is None else key_changed
        return Stream(self._topology, node, self.key_serde, value or self.value_serde, changed)

    def _rekeyed(self, node: Node, key: Serde[Any] | None, value: Serde[Any] | None) -> Stream:
        """``_then`` for an operation that may change the key (a later grouping repartitions),
        with the new key's serde when one is given."""
        out = self._then(node, value=value, key_changed=True)
        out.key_serde = key or self.key_serde
        return out

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
        return self._rekeyed(MapNode(self._topology._name("map"), fn), key, value)

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
        return self._rekeyed(FlatMapNode(self._topology._name("flat-map"), fn), key, value)

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

    def split(self, *, name: str = "") -> BranchedStream:
        """Route each record to at most one branch: Kafka Streams' ``split(Named.as(name))``.

        Add branches with ``.branch(predicate, ...)``, in order; a record goes to the first
        whose predicate holds, and to ``.default_branch()`` (if any) when none does. The
        last call returns the branches by name (``name`` + the branch's name)::

            branches = (orders.split(name="orders-")
                .branch(lambda k, v: v["total"] > 100, Branched.as_("big"))
                .default_branch(Branched.as_("small")))
            branches["orders-big"].to("big-orders")
        """
        node = BranchNode(self._topology._name("split"))
        self._node.children.append(node)
        return BranchedStream(self, node, name)

    def merge(self, other: Stream) -> Stream:
        """Both streams' records as one stream (Kafka Streams' ``merge``), in processing order.

        The merged streams' sources run in one task per partition (one sub-topology), as in
        Kafka Streams; a stateful step after the merge needs the merged topics to be
        co-partitioned, which the worker checks at start-up. Serdes are this stream's.
        """
        if not isinstance(other, Stream) or other._topology is not self._topology:
            raise TopologyError("merge() takes another stream of the same topology")
        node = MergeNode(self._topology._name("merge"))
        other._node.children.append(node)
        return self._then(node, key_changed=self._key_changed or other._key_changed)

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
        return self._rekeyed(CustomNode(self._topology._name("process"), factory, specs), key, value)

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
        self, other: Table | GlobalTable | Stream, joiner: Joiner, **options: Unpack[StreamJoinOptions]
    ) -> Stream:
        """Inner join: ``joiner(value, other_value)``.

        With a table: for keys present in the table. With a global table: for records
        whose ``key(key, value)`` (default: the record's key) is in it. With a stream: for
        records of equal keys at most ``windows`` apart in time (``within(...)``), Kafka
        Streams' KStream-KStream join. ``value``: the result's serde; ``name``: a
        stream-stream join's stores.
        """
        return self._join_as("inner", other, joiner, **options)

    def left_join(
        self, other: Table | GlobalTable | Stream, joiner: Joiner, **options: Unpack[StreamJoinOptions]
    ) -> Stream:
        """Like :meth:`join` but keeps every record of this side; the other value is None without a match.

        Against a stream, the unmatched record is emitted once its window has closed.
        """
        return self._join_as("left", other, joiner, **options)

    def outer_join(
        self,
        other: Stream,
        joiner: Joiner,
        *,
        windows: JoinWindows,
        value: Serde[Any] | None = None,
        name: str | None = None,
    ) -> Stream:
        """Stream-stream join keeping unmatched records of both sides (``None`` for the missing one)."""
        return self._join_as("outer", other, joiner, windows=windows, value=value, name=name)

    def _join_as(
        self,
        how: str,
        other: Table | GlobalTable | Stream,
        joiner: Joiner,
        *,
        windows: JoinWindows | None = None,
        key: Callable[[Any, Any], Any] | None = None,
        value: Serde[Any] | None = None,
        name: str | None = None,
    ) -> Stream:
        """The one dispatch of a stream's joins (``how``: inner, left or outer), by what it joins."""
        if isinstance(other, Stream):
            return self._join_stream(other, joiner, windows, value, how, name)
        if how == "outer":
            raise TopologyError("outer_join() takes a stream (a table's outer join is table.outer_join)")
        if isinstance(other, GlobalTable):
            return self._join_global(other, joiner, key, value, left=how == "left")
        if key is not None:
            raise TopologyError(
                "key= picks the lookup key of a global table; a table is joined on the record's key"
            )
        return self._join(other, joiner, value, left=how == "left")

    def _join_global(
        self,
        table: GlobalTable,
        joiner: Joiner,
        key: Callable[[Any, Any], Any] | None,
        value: Serde[Any] | None,
        left: bool,
    ) -> Stream:
        selector = key if key is not None else (lambda k, _v: k)
        node = GlobalJoinNode(self._topology._name("global-join"), table._node, selector, joiner, left)
        return self._then(node, value=value)  # the record keeps its key: no repartition

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
        if not isinstance(table, Table):
            raise TopologyError("join() takes a table (Topology.table(topic), or a table operation's result)")
        if self._key_changed:
            raise TopologyError("the key may have changed before this join: group or repartition first")
        node = JoinNode(self._topology._name("join"), table._updates("join"), joiner, left)
        return self._then(node, value=value)


class Branched:
    """How a branch of ``split()`` is named and built: Kafka Streams' ``Branched``.

    ``Branched.as_(name)`` names it; ``with_function(fn)`` puts ``fn(branch)`` in the
    result instead of the branch (nothing if it returns None); ``with_consumer(fn)`` calls
    ``fn(branch)`` and leaves the branch out of the result.
    """

    __slots__ = ("consume", "fn", "name")

    def __init__(
        self,
        name: str | None = None,
        fn: Callable[[Stream], Stream | None] | None = None,
        consume: bool = False,
    ) -> None:
        self.name = name
        self.fn = fn
        self.consume = consume

    @staticmethod
    def as_(name: str) -> Branched:
        return Branched(name)

    @staticmethod
    def with_function(fn: Callable[[Stream], Stream | None], name: str | None = None) -> Branched:
        return Branched(name, fn)

    @staticmethod
    def with_consumer(fn: Callable[[Stream], object], name: str | None = None) -> Branched:
        return Branched(name, lambda branch: (fn(branch), None)[1], consume=True)


class BranchedStream:
    """The branches of ``Stream.split()`` being defined (Kafka Streams' ``BranchedKStream``)."""

    def __init__(self, stream: Stream, node: BranchNode, prefix: str) -> None:
        self._stream = stream
        self._node = node
        self._prefix = prefix
        self._result: dict[str, Stream] = {}
        self._done = False

    def branch(
        self, predicate: Callable[[Any, Any], bool], branched: Branched | None = None
    ) -> BranchedStream:
        """Records for which ``predicate(key, value)`` holds and no earlier branch took.

        Unnamed, the branch is called ``prefix`` + its position, counted from 1.
        """
        self._add(predicate, branched or Branched(), str(len(self._node.predicates) + 1))
        return self

    def default_branch(self, branched: Branched | None = None) -> dict[str, Stream]:
        """Records no branch took (unnamed: ``prefix`` + "0"); returns the branches by name."""
        self._add(None, branched or Branched(), "0")
        return self.no_default_branch()

    def no_default_branch(self) -> dict[str, Stream]:
        """Drop records no branch took; returns the branches by name."""
        if self._done:
            raise TopologyError("this split() is finished already")
        self._done = True
        return dict(self._result)

    def _add(self, predicate: Callable[[Any, Any], bool] | None, branched: Branched, position: str) -> None:
        if self._done:
            raise TopologyError("this split() is finished already: branches go before default_branch()")
        name = self._prefix + (branched.name if branched.name is not None else position)
        if name in self._result:
            raise TopologyError(f"two branches are named {name!r}")
        source, topology = self._stream, self._stream._topology
        out = PassThroughNode(topology._name("branch"))
        self._node.predicates.append(predicate)
        self._node.children.append(out)
        branch = Stream(topology, out, source.key_serde, source.value_serde, source._key_changed)
        if branched.fn is None:
            self._result[name] = branch
            return
        made = branched.fn(branch)
        if not branched.consume and made is not None:
            self._result[name] = made


class GroupedStream(_Handle):
    """Records grouped by key, ready to aggregate (``KGroupedStream``)."""

    def __init__(
        self,
        topology: Topology,
        node: Node,
        key: Serde[Any],
        value: Serde[Any],
        windows: TimeWindows | SessionWindows | SlidingWindows | None = None,
    ) -> None:
        super().__init__(topology, node, key, value)
        self._windows = windows

    def windowed_by(self, windows: TimeWindows | SessionWindows | SlidingWindows) -> GroupedStream:
        """Aggregate per key and window: ``tumbling(...)``, ``hopping(...)``, ``sliding(...)`` or ``sessions(...)``."""
        if not isinstance(windows, TimeWindows | SessionWindows | SlidingWindows):
            raise TopologyError(
                "windowed_by() takes tumbling(...), hopping(...), sliding(...) or sessions(...)"
            )
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
        buffer = None
        if isinstance(self._windows, TimeWindows):
            key = WindowedSerde(self.key_serde, self._windows.size_ms)
        elif isinstance(self._windows, SlidingWindows):
            key = WindowedSerde(self.key_serde, self._windows.difference_ms)  # the end is inclusive
        elif isinstance(self._windows, SessionWindows):
            if merger is None:
                raise TopologyError(
                    "aggregate() over session windows needs merger=(key, older, newer) -> merged"
                )
            key = SessionWindowedSerde(self.key_serde)
        spec = self._topology._store(store, "aggregate", key, value)
        if isinstance(self._windows, SlidingWindows):  # new windows are folded from the records in reach
            buffer = self._topology._store(
                f"{spec.name}-records", "aggregate", self.key_serde, self.value_serde
            )
        node = AggregateNode(
            self._topology._name("aggregate"),
            spec,
            initializer,
            aggregator,
            self._windows,
            merger,
            buffer=buffer,
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


# Stream methods a Table lacks: reached for on a Table, the error points to to_stream()
_STREAM_ONLY = frozenset({"to", "peek", "flat_map", "flat_map_values", "map", "process", "group_by_key"})


class Table(_Handle):
    """A changelog stream seen as its latest value per key (``KTable``)."""

    if not TYPE_CHECKING:  # for the type checker a Table has exactly the methods below

        def __getattr__(self, name: str) -> Any:
            """A Table is not a Stream: the Stream methods a Kafka Streams user reaches for say
            where they are (``KTable#toStream()``), instead of a bare AttributeError."""
            if name in _STREAM_ONLY:
                raise AttributeError(
                    f"'Table' object has no attribute {name!r}: a table's changes are a stream, "
                    f"call to_stream().{name}(...)"
                )
            raise AttributeError(f"'Table' object has no attribute {name!r}")

    @property
    def store_name(self) -> str:
        node = self._node
        assert isinstance(node, AggregateNode | TableNode | ForeignKeyResultNode)
        return node.store.name

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
        """The table's updates as a stream: ``(key, new value)``, None when the row was deleted.

        An aggregation's table sends one update per commit per key with the write cache (one
        per input record without); other tables send one per change.
        """
        node = self._node
        if isinstance(node, AggregateNode):
            return Stream(self._topology, node, self.key_serde, self.value_serde)
        out = ToStreamNode(self._topology._name("to-stream"))
        node.children.append(out)
        return Stream(self._topology, out, self.key_serde, self.value_serde)

    # -- table operations: each result is a table too ----------------------------------------
    def _updates(self, what: str) -> Node:
        """This table's node, if its updates can be consumed (``what`` names the operation)."""
        node = self._node
        if isinstance(node, AggregateNode) and node.final:
            raise TopologyError(f"{what}() after suppress(): use to_stream() on the final results")
        if isinstance(node, AggregateNode) and node.windows is not None:
            raise TopologyError(f"{what}() of a windowed table is not supported: call to_stream() first")
        assert isinstance(node, AggregateNode) or emits_changes(node)
        return node

    def filter(self, predicate: Callable[[Any, Any], bool]) -> Table:
        """Rows for which ``predicate(key, value)`` holds; a row that stops matching is deleted downstream."""
        parent = self._updates("filter")
        node = TableFilterNode(self._topology._name("table-filter"), parent, predicate)
        parent.children.append(node)
        return Table(self._topology, node, self.key_serde, self.value_serde)

    def filter_not(self, predicate: Callable[[Any, Any], bool]) -> Table:
        return self.filter(lambda k, v: not predicate(k, v))

    def map_values(self, fn: Callable[[Any], Any], *, value: Serde[Any] | None = None) -> Table:
        """A table of ``fn(value)`` per key (the key stays, so nothing is repartitioned)."""
        parent = self._updates("map_values")
        node = TableMapValuesNode(self._topology._name("table-map-values"), parent, fn)
        parent.children.append(node)
        return Table(self._topology, node, self.key_serde, value or self.value_serde)

    def group_by(
        self,
        selector: Callable[[Any, Any], tuple[Any, Any]],
        *,
        key: Serde[Any] | None = None,
        value: Serde[Any] | None = None,
        name: str | None = None,
    ) -> GroupedTable:
        """Re-key rows for an aggregation: ``selector(key, value) -> (group, value)``.

        Through a repartition topic. When a row changes, its old value leaves its old group
        and the new one joins its new group (one record if the group stays), so
        ``aggregate`` needs both an adder and a subtractor, as Kafka Streams' ``KGroupedTable``.
        """
        parent = self._updates("group_by")
        t = self._topology
        node = TableGroupByNode(t._name("table-group-by"), selector)
        parent.children.append(node)
        k, v = key or self.key_serde, value or self.value_serde
        source = t._repartition(node, k, AdjustSerde(v), name)
        return GroupedTable(t, source, k, v)

    def join(self, other: Table, joiner: Joiner, **options: Unpack[TableJoinOptions]) -> Table:
        """Inner table-table join: ``joiner(value, other_value)`` for keys present in both.

        With ``foreign_key=fn``, a foreign-key join: each row of this table meets the row
        of ``other`` whose key is ``fn(value)`` (Kafka Streams' KIP-213); the result is keyed
        like this table, and follows updates of both sides. Without it, both tables must be
        keyed alike and co-partitioned. ``value``: the result's serde; ``name``: a
        foreign-key join's stores and topics.
        """
        return self._join_as("inner", other, joiner, **options)

    def left_join(self, other: Table, joiner: Joiner, **options: Unpack[TableJoinOptions]) -> Table:
        """Like :meth:`join`, keeping every row of this table (``other_value`` None without a match)."""
        return self._join_as("left", other, joiner, **options)

    def outer_join(
        self, other: Table, joiner: Joiner, *, value: Serde[Any] | None = None, name: str | None = None
    ) -> Table:
        """Rows present in either table: ``joiner(value, other_value)`` with None for the missing side."""
        return self._join_as("outer", other, joiner, value=value, name=name)

    def _join_as(
        self,
        how: str,
        other: Table,
        joiner: Joiner,
        *,
        foreign_key: Callable[[Any], Any] | None = None,
        value: Serde[Any] | None = None,
        name: str | None = None,
    ) -> Table:
        """The one dispatch of a table's joins (``how``: inner, left or outer), by ``foreign_key``."""
        if not isinstance(other, Table):
            raise TopologyError("a table joins another table (a stream joins a table with stream.join)")
        left, right = self._updates("join"), other._updates("join")
        t = self._topology
        out_serde = value or self.value_serde
        if foreign_key is not None:
            return self._join_foreign(other, joiner, foreign_key, how, out_serde, name)
        node = TableJoinNode(t._name("table-join"), joiner, how, left, right)
        for parent, is_left in ((left, True), (right, False)):
            side = TableJoinSideNode(t._name("table-join-side"), node, is_left)
            side.children.append(node)
            parent.children.append(side)
        return Table(t, node, self.key_serde, out_serde)

    def _join_foreign(  # noqa: PLR0917 - the join's parts
        self,
        other: Table,
        joiner: Callable[[Any, Any], Any],
        foreign_key: Callable[[Any], Any],
        how: str,
        value: Serde[Any],
        name: str | None,
    ) -> Table:
        t = self._topology
        base = name or t._name("fk-join")
        result = ForeignKeyResultNode(
            t._name("fk-result"),
            t._store(f"{base}-result", "fk", self.key_serde, value),
            self._node,
            joiner,
            how,
            self.key_serde,
            self.value_serde,
            other.value_serde,
        )
        subscribe = ForeignKeySubscribeNode(t._name("fk-subscribe"), foreign_key, result)
        self._node.children.append(subscribe)
        # subscriptions go to the right table's partition of the foreign key, responses back to the left key's
        registrations = t._repartition(subscribe, other.key_serde, BYTES, f"{base}-subscription", True)
        index = ForeignKeyIndexNode(
            t._name("fk-index"),
            t._store(f"{base}-subscriptions", "fk", other.key_serde, JSON),
            other._node,
            other.key_serde,
            other.value_serde,
        )
        for parent, registration in ((registrations, True), (other._node, False)):
            side = ForeignKeyIndexSideNode(t._name("fk-index-side"), index, registration)
            side.children.append(index)
            parent.children.append(side)
        responses = t._repartition(index, BYTES, BYTES, f"{base}-response", True)
        responses.children.append(result)
        return Table(t, result, self.key_serde, value)


class GlobalTable:
    """A table every worker holds whole (``GlobalKTable``): a join input only."""

    def __init__(self, node: GlobalTableNode, key: Serde[Any], value: Serde[Any]) -> None:
        self._node = node
        self.key_serde = key
        self.value_serde = value

    @property
    def store_name(self) -> str:
        return self._node.store.name


class GroupedTable(_Handle):
    """A table's rows re-keyed by ``Table.group_by``, ready to aggregate (``KGroupedTable``)."""

    def aggregate(
        self,
        initializer: Callable[[], Any],
        adder: Callable[[Any, Any, Any], Any],
        subtractor: Callable[[Any, Any, Any], Any],
        *,
        store: str | None = None,
        value: Serde[Any] = JSON,
    ) -> Table:
        """Per group: ``adder(key, value, current)`` when a row joins, ``subtractor(key, value, current)`` when it leaves."""
        spec = self._topology._store(store, "aggregate", self.key_serde, value)
        node = AggregateNode(
            self._topology._name("table-aggregate"), spec, initializer, adder, subtractor=subtractor
        )
        self._node.children.append(node)
        return Table(self._topology, node, self.key_serde, value)

    def count(self, *, store: str | None = None) -> Table:
        """Rows per group."""
        return self.aggregate(lambda: 0, lambda _k, _v, n: n + 1, lambda _k, _v, n: n - 1, store=store)

    def reduce(
        self,
        adder: Callable[[Any, Any], Any],
        subtractor: Callable[[Any, Any], Any],
        *,
        store: str | None = None,
        value: Serde[Any] | None = None,
    ) -> Table:
        """``adder(current, value)`` when a row joins, ``subtractor(current, value)`` when it leaves;
        a group's first row starts it (as in Kafka Streams, a group all rows left keeps what
        the subtractor made of it)."""
        return self.aggregate(
            _Empty,
            lambda _k, v, cur: v if isinstance(cur, _Empty) else adder(cur, v),
            lambda _k, v, cur: None if isinstance(cur, _Empty) else subtractor(cur, v),
            store=store,
            value=value or self.value_serde,
        )


class _Empty:
    """A reduction with no row yet (never stored: the first row replaces it)."""
