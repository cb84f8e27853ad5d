"""Tables at runtime: processors of ``Change(new, old)`` updates, and value getters.

A processed table's source materializes each record in its store and forwards the change;
``filter``, ``map_values`` and joins transform changes; ``to_stream`` turns them back into
plain records. Derived tables are not stored: a *value getter* computes a derived row
from its parent's store when a join looks it up, as Kafka Streams' ``KTableValueGetter``
does, so a filtered or mapped table costs no store and no changelog.

A foreign-key join (KIP-213) runs in two tasks that talk through two internal topics. The
left task sends a *subscription* for each left row to the right row its foreign key names
(subscribe, with a hash of the left value, or unsubscribe when the key moved away). The
right task keeps, per right key, who subscribed (``ForeignKeyIndexProcessor``) and answers
with the right value, at once and again whenever that right row changes. The left task
joins a *response* only if its hash still matches the current left row (else a newer
subscription is on its way), and keeps the results in a store so it can say what each
result replaced.

Table-table and foreign-key joins live here, not with the stream joins: they take and make
changes and read both sides through value getters, as every table operation does. A
grouped table's aggregation (``TableAggregateProcessor``) is with the other aggregations.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from baton.worker.runtime.processors.base import Build, Factory, ProcessorNode, drop
from baton.worker.state.task_store import MISSING, TaskStore
from baton.worker.topology.changes import (
    DIGEST_SIZE,
    SUBSCRIBE,
    UNSUBSCRIBE,
    Adjust,
    Change,
    decode_response,
    decode_subscription,
    encode_response,
    encode_subscription,
    value_digest,
)
from baton.worker.topology.graph import (
    AggregateNode,
    ForeignKeyIndexNode,
    ForeignKeyIndexSideNode,
    ForeignKeyResultNode,
    ForeignKeySubscribeNode,
    Node,
    TableFilterNode,
    TableGroupByNode,
    TableJoinNode,
    TableJoinSideNode,
    TableMapValuesNode,
    TableNode,
    ToStreamNode,
)

Getter = Callable[[Any], Any]  # key -> the table's value for it, None if absent


def store_getter(store: TaskStore, key_serialize: Callable[[Any], bytes]) -> Getter:
    def get(key: Any) -> Any:
        value = store.get(key_serialize(key))
        return None if value is MISSING else value

    return get


def value_getter(
    node: Node, stores: Mapping[str, TaskStore], tailed: Mapping[str, Callable[[bytes], bytes | None]]
) -> Getter:
    """How to read the table ``node`` stands for, by key, in this task (its uncommitted updates included)."""
    if isinstance(node, TableNode) and not node.processed:
        raw_get, spec = tailed[node.store.name], node.store
        key_serialize, deserialize = spec.key_serde.serialize, spec.value_serde.deserialize

        def tailed_get(key: Any) -> Any:
            raw = raw_get(key_serialize(key))
            return None if raw is None else deserialize(raw)

        return tailed_get
    if isinstance(node, TableNode | AggregateNode | ForeignKeyResultNode):
        return store_getter(stores[node.store.name], node.store.key_serde.serialize)
    if isinstance(node, TableFilterNode):
        parent, predicate = value_getter(node.parent, stores, tailed), node.predicate

        def filtered(key: Any) -> Any:
            value = parent(key)
            return value if value is not None and predicate(key, value) else None

        return filtered
    if isinstance(node, TableMapValuesNode):
        parent, fn = value_getter(node.parent, stores, tailed), node.fn

        def mapped(key: Any) -> Any:
            value = parent(key)
            return None if value is None else fn(value)

        return mapped
    if isinstance(node, TableJoinNode):
        left, right = value_getter(node.left, stores, tailed), value_getter(node.right, stores, tailed)
        joiner, how = node.joiner, node.how
        return lambda key: joined(how, joiner, left(key), right(key))
    raise TypeError(f"{type(node).__name__} is not a table")  # pragma: no cover - the DSL checks


def joined(how: str, joiner: Callable[[Any, Any], Any], left: Any, right: Any) -> Any:
    """A table-table join's row for one key, given both sides' rows (None: no row)."""
    if left is None and right is None:
        return None
    if how == "inner" and (left is None or right is None):
        return None
    if how == "left" and left is None:
        return None
    return joiner(left, right)


def store_change(
    store: TaskStore, key_bytes: bytes, key: Any, value: Any, forward: Callable[[Any, Any], None]
) -> None:
    """Store a stored table's new row (None deletes it) and forward the change, with the row it replaced.

    Deleting an absent row changes nothing, so nothing is forwarded then."""
    old = store.get(key_bytes)
    old = None if old is MISSING else old
    if value is None and old is None:
        return
    store.put(key_bytes, key, value)
    forward(key, Change(value, old))


class TableSourceProcessor(ProcessorNode):
    """A processed table's records: stored (the write cache logs them), forwarded as changes at once."""

    __slots__ = ("key_serialize", "store")

    def __init__(self, node: TableNode, store: TaskStore) -> None:
        super().__init__()
        self.store = store
        self.key_serialize = node.store.key_serde.serialize
        store.forward = drop  # changes go downstream from process(), with their old values

    def process(self, key: Any, value: Any) -> None:
        if key is None:
            return  # no row to update (Kafka Streams drops these too)
        store_change(self.store, self.key_serialize(key), key, value, self.forward)


class TableFilterProcessor(ProcessorNode):
    __slots__ = ("predicate",)

    def __init__(self, predicate: Callable[[Any, Any], bool]) -> None:
        super().__init__()
        self.predicate = predicate

    def process(self, key: Any, change: Change) -> None:
        new, old = change
        if new is not None and not self.predicate(key, new):
            new = None
        if old is not None and not self.predicate(key, old):
            old = None
        if new is not None or old is not None:  # a row that never matched stays unseen
            self.forward(key, Change(new, old))


class TableMapValuesProcessor(ProcessorNode):
    __slots__ = ("fn",)

    def __init__(self, fn: Callable[[Any], Any]) -> None:
        super().__init__()
        self.fn = fn

    def process(self, key: Any, change: Change) -> None:
        new, old = change
        fn = self.fn
        self.forward(key, Change(None if new is None else fn(new), None if old is None else fn(old)))


class ToStreamProcessor(ProcessorNode):
    """A table's changes as records: the new value (None: the row was deleted)."""

    __slots__ = ()

    def process(self, key: Any, change: Change) -> None:
        self.forward(key, change.new)


class TableGroupByProcessor(ProcessorNode):
    """Sends each change to the groups it touches: ``Adjust(old, None)`` to the old group,
    ``Adjust(None, new)`` to the new one, or one ``Adjust(old, new)`` when the group stays."""

    __slots__ = ("selector",)

    def __init__(self, selector: Callable[[Any, Any], tuple[Any, Any]]) -> None:
        super().__init__()
        self.selector = selector

    def process(self, key: Any, change: Change) -> None:
        new, old = change
        select = self.selector
        new_group, new_value = (None, None) if new is None else select(key, new)
        old_group, old_value = (None, None) if old is None else select(key, old)
        if old_group is not None and old_group == new_group:
            self.forward(new_group, Adjust(old_value, new_value))
            return
        if old_group is not None:
            self.forward(old_group, Adjust(old_value, None))
        if new_group is not None:
            self.forward(new_group, Adjust(None, new_value))


class TableJoinProcessor(ProcessorNode):
    """A table-table join: a change on one side is joined with the other side's current row."""

    __slots__ = ("how", "joiner", "left", "right")

    def __init__(self, node: TableJoinNode, left: Getter, right: Getter) -> None:
        super().__init__()
        self.joiner, self.how = node.joiner, node.how
        self.left, self.right = left, right

    def update(self, from_left: bool, key: Any, change: Change) -> None:
        how, joiner = self.how, self.joiner
        if from_left:
            other = self.right(key)
            new, old = joined(how, joiner, change.new, other), joined(how, joiner, change.old, other)
        else:
            other = self.left(key)
            new, old = joined(how, joiner, other, change.new), joined(how, joiner, other, change.old)
        if new is not None or old is not None:
            self.forward(key, Change(new, old))


class TableJoinSideProcessor(ProcessorNode):
    __slots__ = ("from_left", "join")

    def __init__(self, join: TableJoinProcessor, from_left: bool) -> None:
        super().__init__()
        self.join, self.from_left = join, from_left

    def process(self, key: Any, change: Change) -> None:
        self.join.update(self.from_left, key, change)


class ForeignKeyResultProcessor(ProcessorNode):
    """Left task: joins the responses that still match their left row; keeps the results."""

    __slots__ = (
        "how",
        "joiner",
        "key_deserialize",
        "key_serialize",
        "left",
        "left_serialize",
        "right_deserialize",
        "store",
    )

    def __init__(self, node: ForeignKeyResultNode, store: TaskStore, left: Getter) -> None:
        super().__init__()
        self.store, self.left = store, left
        self.joiner, self.how = node.joiner, node.how
        self.key_serialize, self.key_deserialize = node.left_key.serialize, node.left_key.deserialize
        self.left_serialize = node.left_value.serialize
        self.right_deserialize = node.right_value.deserialize
        store.forward = drop  # results go downstream from emit(), with their old values

    def process(self, key: Any, value: Any) -> None:
        """A response: ``key`` is the left key's bytes, ``value`` the hash and the right value."""
        digest, right_raw = decode_response(value)
        left_key = self.key_deserialize(key)
        left = self.left(left_key)
        if left is None or value_digest(self.left_serialize(left)) != digest:
            return  # answers a left row that has changed since: its own response follows
        right = None if right_raw is None else self.right_deserialize(right_raw)
        self.emit(left_key, left, right)

    def emit(self, key: Any, left: Any, right: Any) -> None:
        """Store and forward the result for ``key`` (None deletes it)."""
        unmatched = left is None or (right is None and self.how != "left")
        result = None if unmatched else self.joiner(left, right)
        store_change(self.store, self.key_serialize(key), key, result, self.forward)


class ForeignKeySubscribeProcessor(ProcessorNode):
    """Left task: a left row's change (un)subscribes it; rows without a foreign key settle at once."""

    __slots__ = ("foreign_key", "key_serialize", "left_serialize", "result")

    def __init__(self, node: ForeignKeySubscribeNode, result: ForeignKeyResultProcessor) -> None:
        super().__init__()
        self.foreign_key = node.foreign_key
        self.result = result
        self.key_serialize = node.result.left_key.serialize
        self.left_serialize = node.result.left_value.serialize

    def process(self, key: Any, change: Change) -> None:
        if key is None:
            return
        new, old = change
        new_fk = None if new is None else self.foreign_key(new)
        old_fk = None if old is None else self.foreign_key(old)
        key_bytes = self.key_serialize(key)
        if old_fk is not None and old_fk != new_fk:
            self.forward(old_fk, encode_subscription(UNSUBSCRIBE, bytes(DIGEST_SIZE), key_bytes))
        if new_fk is None:  # deleted, or no foreign key: nothing to ask the right side
            self.result.emit(key, new, None)
            return
        digest = value_digest(self.left_serialize(new))
        self.forward(new_fk, encode_subscription(SUBSCRIBE, digest, key_bytes))


class ForeignKeyIndexProcessor(ProcessorNode):
    """Right task: who subscribed to each right key, and the responses they are owed.

    Subscribers of one right key are one stored value (left key -> hash), so a right key
    with very many subscribers rewrites a large value on each subscription.
    """

    __slots__ = ("key_serialize", "right", "right_serialize", "store")

    def __init__(self, node: ForeignKeyIndexNode, store: TaskStore, right: Getter) -> None:
        super().__init__()
        self.store, self.right = store, right
        self.key_serialize = node.right_key.serialize
        self.right_serialize = node.right_value.serialize
        store.forward = drop

    def register(self, right_key: Any, raw: bytes) -> None:
        op, digest, left_key = decode_subscription(raw)
        key_bytes = self.key_serialize(right_key)
        current = self.store.get(key_bytes)
        subscribers = {} if current is MISSING else dict(current)
        if op == UNSUBSCRIBE:
            subscribers.pop(left_key.hex(), None)
        else:
            subscribers[left_key.hex()] = digest.hex()
        self.store.put(key_bytes, right_key, subscribers or None)
        if op == SUBSCRIBE:
            right = self.right(right_key)
            self.forward(
                left_key, encode_response(digest, None if right is None else self.right_serialize(right))
            )

    def right_changed(self, right_key: Any, change: Change) -> None:
        subscribers = self.store.get(self.key_serialize(right_key))
        if subscribers is MISSING:
            return
        raw = None if change.new is None else self.right_serialize(change.new)
        for left_key, digest in subscribers.items():
            self.forward(bytes.fromhex(left_key), encode_response(bytes.fromhex(digest), raw))


class ForeignKeyIndexSideProcessor(ProcessorNode):
    __slots__ = ("index", "registration")

    def __init__(self, index: ForeignKeyIndexProcessor, registration: bool) -> None:
        super().__init__()
        self.index, self.registration = index, registration

    def process(self, key: Any, value: Any) -> None:
        if key is None:
            return
        if self.registration:
            self.index.register(key, value)
        else:
            self.index.right_changed(key, value)


def _table_join_side(node: TableJoinSideNode, build: Build) -> ProcessorNode:
    join = build.processor_of(node.join)
    assert isinstance(join, TableJoinProcessor)
    return TableJoinSideProcessor(join, node.left)


def _foreign_key_subscribe(node: ForeignKeySubscribeNode, build: Build) -> ProcessorNode:
    result = build.processor_of(node.result)
    assert isinstance(result, ForeignKeyResultProcessor)
    return ForeignKeySubscribeProcessor(node, result)


def _foreign_key_index_side(node: ForeignKeyIndexSideNode, build: Build) -> ProcessorNode:
    index = build.processor_of(node.index)
    assert isinstance(index, ForeignKeyIndexProcessor)
    return ForeignKeyIndexSideProcessor(index, node.registration)


FACTORIES: dict[type[Node], Factory] = {
    TableNode: lambda node, build: TableSourceProcessor(node, build.stores[node.store.name]),
    TableFilterNode: lambda node, _build: TableFilterProcessor(node.predicate),
    TableMapValuesNode: lambda node, _build: TableMapValuesProcessor(node.fn),
    ToStreamNode: lambda _node, _build: ToStreamProcessor(),
    TableGroupByNode: lambda node, _build: TableGroupByProcessor(node.selector),
    TableJoinNode: lambda node, build: TableJoinProcessor(
        node, build.value_of(node.left), build.value_of(node.right)
    ),
    TableJoinSideNode: _table_join_side,
    ForeignKeyResultNode: lambda node, build: ForeignKeyResultProcessor(
        node, build.stores[node.store.name], build.value_of(node.left)
    ),
    ForeignKeySubscribeNode: _foreign_key_subscribe,
    ForeignKeyIndexNode: lambda node, build: ForeignKeyIndexProcessor(
        node, build.stores[node.store.name], build.value_of(node.right)
    ),
    ForeignKeyIndexSideNode: _foreign_key_index_side,
}
