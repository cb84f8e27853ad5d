"""``Stream`` (``KStream``), its branches (``split``) and its grouped form, ``GroupedStream``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from baton.worker.topology import counting
from baton.worker.topology.custom import Processor
from baton.worker.topology.dsl.base import Handle, Joiner, TopologyError
from baton.worker.topology.dsl.table import GlobalTable, Table
from baton.worker.topology.graph import (
    AggregateNode,
    BranchNode,
    CustomNode,
    FilterNode,
    FlatMapNode,
    GlobalJoinNode,
    JoinNode,
    MapNode,
    MapValuesNode,
    MergeNode,
    Node,
    PassThroughNode,
    PeekNode,
    SelectKeyNode,
    SinkNode,
    StreamJoinNode,
    StreamJoinSideNode,
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

if TYPE_CHECKING:
    from baton.worker.topology.dsl.builder import Topology


class StreamJoinOptions(TypedDict, total=False):
    """The keywords of ``Stream.join`` and ``Stream.left_join``, named once for both."""

    windows: JoinWindows | None  # with a stream: how far apart joined records may be
    key: Callable[[Any, Any], Any] | None  # with a global table: the lookup key
    value: Serde[Any] | None
    name: str | None


class Stream(Handle):
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

    def select_key(self, selector: Callable[[Any, Any], Any], *, key: Serde[Any] | None = None) -> Stream:
        """``selector(key, value) -> new_key``, the value unchanged. A later grouping repartitions."""
        return self._rekeyed(SelectKeyNode(self._topology._name("select-key"), selector), key, None)

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
        return self.select_key(selector, key=key).group_by_key(value=value, name=name)

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


class GroupedStream(Handle):
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
            counting.zero, counting.plus_one, store=store, value=JSON, merger=counting.added
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
