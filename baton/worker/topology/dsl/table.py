"""``Table`` (``KTable``), its grouped form, ``GroupedTable``, ``GlobalTable`` and ``suppress``."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict, Unpack

from baton.worker.topology import counting
from baton.worker.topology.changes import AdjustSerde
from baton.worker.topology.dsl.base import Handle, Joiner, TopologyError
from baton.worker.topology.graph import (
    AggregateNode,
    ForeignKeyIndexNode,
    ForeignKeyIndexSideNode,
    ForeignKeyResultNode,
    ForeignKeySubscribeNode,
    GlobalTableNode,
    Node,
    TableFilterNode,
    TableGroupByNode,
    TableJoinNode,
    TableJoinSideNode,
    TableMapValuesNode,
    TableNode,
    ToStreamNode,
    emits_changes,
)
from baton.worker.topology.serdes import BYTES, JSON, Serde

if TYPE_CHECKING:
    from baton.worker.topology.dsl.stream import Stream


class TableJoinOptions(TypedDict, total=False):
    """The keywords of ``Table.join`` and ``Table.left_join``, named once for both."""

    foreign_key: Callable[[Any], Any] | None
    value: Serde[Any] | None
    name: str | None


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


class Table(Handle):
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
        from baton.worker.topology.dsl.stream import Stream  # stream.py imports this module

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


class GroupedTable(Handle):
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
        return self.aggregate(counting.zero, counting.plus_one, counting.minus_one, store=store)

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
