"""A source's line of processors run as one loop: the general path's shapes at the fused path's cost.

``runtime/fused.py`` runs a source that feeds an aggregation directly. Most other topologies
are a line too: a source, some stateless steps, and one thing at the end. Issue 50's
topology is two of them, ``stream -> filter -> group_by's select_key -> repartition sink`` and
``repartition source -> windowed count``, and a stream-table join is
``stream -> join -> sink``. On the general path (``Task.process_run``) each record costs a
Python call per processor, another per serde, and the windowed aggregation's own calls
(the window's key object and bytes, the store's ``get`` and ``put``, the index, the
advance of stream time): 21 Python calls a record for issue 50's topology, 4.6 here (the
user's functions and the send). This loop takes a run of records through the line in one
frame, record by record:

* **Steps** (``filter``, ``map``, ``select_key``, ``map_values``, ``peek``, a stream-table ``join``) call
  the user's function and nothing else. A join with a table only looked up (*tailed*: its
  topic is its changelog, written by the restore thread) reads the table's store by the
  record's own key bytes when the serdes round-trip, keeps the rows it read until the
  store is written (``TableLookup``), and decodes them with the serde's C function.
* **A sink** serializes with the serdes' C functions (``serdes.fast_serializer``), and
  sends the record's own key or value bytes when the steps left the object as it was and
  the serde round-trips (str, bytes, long), or, for a repartition topic's value behind
  filters and key selectors only, decodes them alike (JSON too, ``serdes.decodes_alike``;
  a ``map_values`` may change a dict in place and return it): on the producing side of a
  repartition, a ``group_by`` encodes only the new key.
* **An aggregation** over a caching store, of keys or of time windows (tumbling, hopping),
  folds straight into the write cache as ``FusedAggregate`` does: the store key is the
  record's key bytes (plus the window's start) when the serde round-trips, a window already
  in the cache keeps its ``Windowed`` key object, and ``_advance`` (closing windows, final
  results, expiry) is called only once stream time reaches the index's ``next_due``.

What a user sees does not change: records go one by one, in offset order, each through
every step before the next record is read; sends, dead letters, the cache's dirty entries
and flush points, stream time, lateness, closing and expiry are those of the general path,
and the record context is left where the general path leaves it. As in ``FusedAggregate``,
a record whose key or value the serdes' C functions refuse, or whose timestamp the
extractor refuses, is handed back to the general path, which runs the serde's own
``deserialize`` and processes it or dead-letters it with the serde's message; an error in
a step or at the end is dead-lettered here, once (a user's function never runs twice), with
the serde's own words when a C serializer refused a value.

``chain`` builds the loop only for a line it knows exactly (``tree.fast_path`` asks it
after ``fused.fuse``): any other processor, a fan-out, a custom processor (punctuators
need stream time), sessions, sliding windows, table aggregations or an uncached store keep
the general path. ``tests/unit/worker/runtime/test_fast_path_models.py`` runs random inputs through this
loop and through the general path (``Task(fuse_aggregations=False)``) and compares every
output, dead letter, store, position and the record context.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from baton.worker.runtime import own_json
from baton.worker.runtime.processors.aggregate import AggregateProcessor
from baton.worker.runtime.processors.base import ProcessorNode
from baton.worker.runtime.processors.joins import JoinProcessor
from baton.worker.runtime.processors.stateless import (
    FilterProcessor,
    MapProcessor,
    MapValuesProcessor,
    PeekProcessor,
    SelectKeyProcessor,
    SinkProcessor,
)
from baton.worker.runtime.processors.windowed import NEVER, TimeWindowAggregateProcessor
from baton.worker.runtime.producer import dead_letter_stage
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import DELETED, MISSING, entry_size
from baton.worker.topology.context import RecordContext
from baton.worker.topology.counting import plus_one
from baton.worker.topology.graph import TableNode
from baton.worker.topology.serdes import (
    BYTES,
    Serde,
    decodes_alike,
    fast_deserializer,
    fast_serializer,
    round_trips,
)
from baton.worker.topology.windows import Windowed, WindowedSerde

if TYPE_CHECKING:
    from baton.worker.runtime.record import Message
    from baton.worker.runtime.task import DeadLetter
    from baton.worker.topology.graph import SourceNode

# what a step does with the record: (kind, the user's function, the join's table or None)
FILTER, MAP, MAP_VALUES, PEEK, JOIN, SELECT_KEY = range(6)
Step = tuple[int, Callable[..., Any], "TableLookup | None"]

_START = struct.Struct(">q").pack  # a time window's start, after the key bytes (``WindowedSerde``)


# rows of a tailed table one join step of a task keeps (a few MB at most), before it starts over
ROWS_KEPT = 16_384


class TableLookup:
    """How a join step reads its table: the value getter, or a tailed table's store itself.

    A tailed table (only looked up: its topic is its changelog) is written by the restore
    thread, never by the task, so the step keeps the rows it read, as bytes: a row read
    again costs a dict lookup instead of a RocksDB read (about a microsecond). They are
    forgotten when the store's ``generation`` says it was written since (checked as each run
    starts) or ``ROWS_KEPT`` are kept. A run thus reads each row as the store held it when
    the run started or later; the restore thread's writes were never ordered with the task's
    records anyway (the task reads RocksDB while that thread writes it).
    """

    __slots__ = (
        "deserialize",
        "generation",
        "get",
        "key_is_raw",
        "key_serde",
        "left",
        "raw_get",
        "rows",
        "serialize_key",
        "store",
        "value_serde",
    )

    def __init__(self, join: JoinProcessor, store: KeyValueStore | None, source_key: Serde[Any]) -> None:
        self.get = join.get  # the general path's getter: any table
        self.left = join.left
        # a tailed table's store, read by key bytes (the record's own when the serdes agree),
        # its rows decoded by the serde's C function; None: call ``get``
        self.store = store
        self.raw_get = None if store is None else store.get
        self.rows: dict[bytes, bytes | None] = {}
        self.generation = -1
        spec = join.table.store if store is not None and isinstance(join.table, TableNode) else None
        self.key_serde: Serde[Any] = source_key if spec is None else spec.key_serde
        self.value_serde: Serde[Any] = BYTES if spec is None else spec.value_serde  # (unread without a store)
        self.key_is_raw = type(self.key_serde) is type(source_key) and round_trips(self.key_serde)
        self.serialize_key = fast_serializer(self.key_serde)
        self.deserialize = fast_deserializer(self.value_serde)

    def fresh(self) -> None:
        """At a run's start: forget the rows kept if the store was written since they were read."""
        assert self.store is not None
        if self.store.generation != self.generation:
            self.rows.clear()
            self.generation = self.store.generation


class FusedChain:
    """One source's records through a line of stateless steps into a sink or an aggregation."""

    __slots__ = (
        "_aggregate",
        "_ctx",
        "_dead_letter",
        "_deserialize_key",
        "_deserialize_value",
        "_extract",
        "_key_is_raw",
        "_key_serde",
        "_own_json",
        "_partition",
        "_sink",
        "_steps",
        "_value_is_raw",
        "_value_serde",
        "stopped",
    )

    def __init__(  # noqa: PLR0917 - the loop's parts
        self,
        node: SourceNode,
        steps: list[Step],
        end: SinkProcessor | AggregateProcessor | TimeWindowAggregateProcessor,
        ctx: RecordContext,
        dead_letter: DeadLetter,
        partition: int,
    ) -> None:
        self._partition = partition  # the task's: what the general path puts in the context
        self.stopped = 0  # where the last run stopped (``FusedAggregate.run`` says how it is read)
        self._ctx = ctx
        self._dead_letter = dead_letter
        self._deserialize_key = fast_deserializer(node.key_serde)
        self._deserialize_value = fast_deserializer(node.value_serde)
        self._extract = node.timestamp
        self._steps = tuple(steps)
        self._sink = end if isinstance(end, SinkProcessor) else None
        self._aggregate = None if isinstance(end, SinkProcessor) else end
        # What the end serializes: the sink's key and value, an aggregation's store key (a
        # windowed one: the key before the window's start).
        if isinstance(end, SinkProcessor):
            key_serde, value_serde = end.key_serde, end.value_serde
        else:
            key_serde, value_serde = end.store.spec.key_serde, end.store.spec.value_serde
            if isinstance(key_serde, WindowedSerde):
                key_serde = key_serde.inner
        self._key_serde, self._value_serde = key_serde, value_serde
        # The record's own bytes stand for a key (value) the steps left as they were (the same
        # object) when the end's serde would make those bytes of it again: one of the same
        # kind as the source's that round-trips. (And when they are ``bytes``: the compactor's
        # replay hands in ``bytearray``s, which a store key cannot be.)
        self._key_is_raw = type(key_serde) is type(node.key_serde) and round_trips(key_serde)
        # A repartition topic's value needs only to decode alike (JSON: the bytes it arrived
        # in, not orjson's own again), but a JSON value is a dict or list that a step may
        # change in place and return (``v["region"] = ...; return v``): the same object, other
        # content. So only behind steps that are handed the value to decide something, not to
        # make the record's value: filters and key selectors (``group_by``).
        alike = (
            isinstance(end, SinkProcessor)
            and end.internal
            and all(kind in {FILTER, SELECT_KEY} for kind, _, _ in steps)
        )
        same_kind = type(value_serde) is type(node.value_serde)
        self._value_is_raw = same_kind and (decodes_alike if alike else round_trips)(value_serde)
        # a count straight from Baton's own repartition topic of JSON takes a value as read,
        # without parsing it (``own_json``)
        self._own_json = (
            not isinstance(end, SinkProcessor) and not steps and own_json.takes_as_read(node, end.aggregator)
        )

    def run(self, messages: Sequence[Message], start: int, stop: int) -> None:  # noqa: C901 - the per-record loop, inlined on purpose: each helper would be a call per record
        """Run ``messages[start:stop]`` up to the end of the run or a record this loop hands back.

        ``stopped`` is the index it stopped at, as in ``FusedAggregate.run``: the caller
        keeps the task's positions and gives a handed-back record to the general path.
        Written for CPython's speed; the processors' ``process`` (``FilterProcessor``,
        ``JoinProcessor``, ``SinkProcessor``, ``AggregateProcessor``,
        ``TimeWindowAggregateProcessor``) and ``TaskStore.put`` say the same plainly.
        """
        first = messages[start]
        topic, partition = first.topic(), first.partition()
        assert topic is not None and partition is not None
        ctx, own = self._ctx, self._partition
        ctx.topic = topic
        ctx.partition = own
        deserialize_key, deserialize_value = self._deserialize_key, self._deserialize_value
        extract, dead_letter, steps = self._extract, self._dead_letter, self._steps
        key_is_raw, value_is_raw = self._key_is_raw, self._value_is_raw
        own_json_values = self._own_json
        key_serde, value_serde = self._key_serde, self._value_serde
        key_serialize, value_serialize = fast_serializer(key_serde), fast_serializer(value_serde)
        sink, agg = self._sink, self._aggregate
        for _, _, table in steps:
            if table is not None and table.store is not None:
                table.fresh()
        if sink is not None:
            send, sink_topic, gate, to_internal = sink.send, sink.topic, sink.gate, sink.internal
        else:
            assert agg is not None
            store, initializer, aggregator = agg.store, agg.initializer, agg.aggregator
            counting = aggregator is plus_one  # count(): its fold inlined (``topology/counting.py``)
            overlay, budget = store.overlay, store.budget  # the overlay is only ever changed in place
            overlay_get = overlay.get
            dirty = store.dirty  # a flush replaces it: read again after anything that may flush
            windowed = agg if isinstance(agg, TimeWindowAggregateProcessor) else None
            if windowed is not None:
                windows, on_late = windowed.windows, windowed.on_late
                size, advance, retention = windows.size_ms, windows.advance_ms, windows.retention_ms
                size_and_grace, tumbling = size + windows.grace_ms, advance == size
                index = windowed.index  # None until the first record loads it from the store
                due = NEVER if index is None else index.next_due()
                # a window in the cache keeps its key object: equal bytes, equal key (round-trips)
                reuse_window = round_trips(key_serde)
        i, done_offset, done_timestamp = start, -1, 0
        try:
            while i < stop:
                msg = messages[i]
                if msg.partition() != partition or msg.topic() != topic or msg.error() is not None:
                    break
                offset: int = msg.offset()  # type: ignore[assignment]
                timestamp = msg.timestamp()[1]
                raw_key = msg.key()
                raw_value = msg.value()
                try:
                    key0 = None if raw_key is None else deserialize_key(raw_key)
                    if raw_value is None:
                        value0 = None
                    elif own_json_values:  # own_json_value, inlined: the count never reads the value
                        value0 = None if raw_value == b"null" else raw_value
                    else:
                        value0 = deserialize_value(raw_value)
                    if extract is not None:
                        timestamp = extract(key0, value0, timestamp)
                        if timestamp < 0:
                            break
                except Exception:
                    break  # the general path runs the serde itself: it takes the record or dead-letters it
                key, value = key0, value0
                try:
                    # -- the steps: each may drop the record (break) ------------------------------
                    for kind, fn, table in steps:
                        if kind == FILTER:
                            if not fn(key, value):
                                break
                        elif kind == MAP:
                            key, value = fn(key, value)
                        elif kind == SELECT_KEY:
                            key = fn(key, value)
                        elif kind == MAP_VALUES:
                            value = fn(value)
                        elif kind == PEEK:
                            fn(key, value)
                        else:  # JOIN: JoinProcessor.process, with a tailed table read here
                            assert table is not None
                            if key is None:
                                other = None
                            elif table.raw_get is None:
                                other = table.get(key)
                            else:
                                if key is key0 and table.key_is_raw and type(raw_key) is bytes:
                                    lookup: bytes = raw_key
                                else:
                                    try:
                                        lookup = table.serialize_key(key)
                                    except Exception:  # the serde's own error for the dead letter
                                        lookup = table.key_serde.serialize(key)
                                rows = table.rows
                                row = rows.get(lookup, MISSING)
                                if row is MISSING:
                                    row = table.raw_get(lookup)
                                    if len(rows) >= ROWS_KEPT:
                                        rows.clear()
                                    rows[lookup] = row
                                if row is None:
                                    other = None
                                else:
                                    try:
                                        other = table.deserialize(row)
                                    except Exception:  # the serde's own error, worded for the dead letter
                                        other = table.value_serde.deserialize(row)
                            if other is None:
                                if not table.left:
                                    break
                                value = fn(value, None)
                            else:
                                value = fn(value, other)
                    # -- the end: a sink ----------------------------------------------------------
                    else:
                        if sink is not None:
                            try:
                                # None first, as the general path: a JSON null's raw bytes
                                # would reach a count over the topic as a value (``own_json``)
                                key_bytes = (
                                    None
                                    if key is None
                                    else raw_key
                                    if key is key0 and key_is_raw and type(raw_key) is bytes
                                    else key_serialize(key)
                                )
                                value_bytes = (
                                    None
                                    if value is None
                                    else raw_value
                                    if value is value0 and value_is_raw and type(raw_value) is bytes
                                    else value_serialize(value)
                                )
                            except Exception:  # the serdes' own serialize: the same bytes, or their own error
                                key_bytes = None if key is None else key_serde.serialize(key)
                                value_bytes = None if value is None else value_serde.serialize(value)
                            if to_internal or gate is None or gate.allows(topic, own, offset):
                                send(sink_topic, key_bytes, value_bytes, None, timestamp, None)
                        # -- or an aggregation, of a key or of its time windows -------------------
                        elif key is not None and value is not None:
                            if windowed is None:
                                starts: Sequence[int | None] = _KEY_ONLY
                            else:
                                if index is None:
                                    index = windowed._load()
                                    due = index.next_due()
                                loaded = index
                                now = windowed.stream_time
                                if timestamp > now:
                                    windowed.stream_time = now = timestamp
                                folded = False
                                starts = (
                                    ((timestamp - timestamp % size,) if timestamp >= 0 else ())
                                    if tumbling
                                    else windows.starts_for(timestamp)
                                )
                            for window_start in starts:
                                if window_start is not None:
                                    close_at = window_start + size_and_grace
                                    if close_at <= now:
                                        continue  # late for this window: it closed, and a closed window never changes
                                entry_key: bytes
                                if key is key0 and key_is_raw and type(raw_key) is bytes:
                                    entry_key = raw_key
                                else:
                                    try:
                                        entry_key = key_serialize(key)
                                    except Exception:  # the serde's own error for the dead letter
                                        entry_key = key_serde.serialize(key)
                                if window_start is not None:
                                    entry_key += _START(window_start)
                                current = overlay_get(entry_key, MISSING)
                                if current is MISSING or current is DELETED:
                                    # a window the index does not hold is in no store: no RocksDB read
                                    current = (
                                        store.get(entry_key)
                                        if window_start is None or entry_key in loaded
                                        else MISSING
                                    )
                                    if current is MISSING:
                                        current = initializer()
                                entry = dirty.get(entry_key)
                                if window_start is None:
                                    stored_key = key
                                elif entry is not None and reuse_window:
                                    stored_key = entry[0]
                                else:
                                    stored_key = Windowed(key, window_start, window_start + size)
                                new = current + 1 if counting else aggregator(key, value, current)
                                if new is None:  # a delete
                                    _set(ctx, offset, timestamp)
                                    store.put(entry_key, stored_key, new)
                                    dirty = store.dirty
                                else:  # TaskStore.put, inlined
                                    overlay[entry_key] = new
                                    if entry is None:
                                        grown = entry_size(entry_key, new)
                                        store.dirty_bytes += grown
                                        budget.used += grown
                                    dirty[entry_key] = (
                                        stored_key,
                                        new,
                                        topic,
                                        own,
                                        offset,
                                        timestamp,
                                    )
                                    if budget.used > budget.limit:
                                        _set(ctx, offset, timestamp)
                                        store.flush()
                                        dirty = store.dirty
                                if window_start is not None:
                                    if entry is None:  # a window in the cache is in the index already
                                        loaded.add(entry_key, stored_key, close_at, window_start + retention)
                                        due = min(due, close_at)  # expiry comes at or after closing
                                    folded = True
                            if windowed is not None:
                                if not folded:
                                    on_late()
                                if due <= now:  # something closes or expires: _advance has work
                                    _set(ctx, offset, timestamp)
                                    windowed._advance(loaded)
                                    dirty = store.dirty
                                    due = loaded.next_due()
                except Exception as exc:
                    _set(ctx, offset, timestamp)
                    dead_letter(exc, dead_letter_stage(exc), msg)
                    if agg is not None:
                        dirty = store.dirty
                done_offset, done_timestamp = offset, timestamp
                i += 1
        finally:
            self.stopped = i
            if i > start:  # where the general path leaves the context: at the last record processed
                _set(ctx, done_offset, done_timestamp)


_KEY_ONLY: tuple[None] = (None,)  # a key-value aggregation folds one entry: no window


def _set(ctx: RecordContext, offset: int, timestamp: int) -> None:
    """The record context of the record in the loop, where something may read it."""
    ctx.offset = offset
    ctx.timestamp = timestamp


def chain(
    node: SourceNode,
    root: ProcessorNode,
    ctx: RecordContext,
    dead_letter: DeadLetter,
    *,
    partition: int,
    tables: Mapping[str, KeyValueStore],
) -> FusedChain | None:
    """The loop for a source whose records go down one line of processors it knows, else None."""
    steps: list[Step] = []
    proc = root
    while len(proc.children) == 1:
        proc = proc.children[0]
        if type(proc) is ProcessorNode:  # a merge's pass-through
            continue
        if type(proc) is FilterProcessor:
            steps.append((FILTER, proc.predicate, None))
        elif type(proc) is MapProcessor:
            steps.append((MAP, proc.fn, None))
        elif type(proc) is SelectKeyProcessor:
            steps.append((SELECT_KEY, proc.selector, None))
        elif type(proc) is MapValuesProcessor:
            steps.append((MAP_VALUES, proc.fn, None))
        elif type(proc) is PeekProcessor:
            steps.append((PEEK, proc.fn, None))
        elif type(proc) is JoinProcessor:
            table = proc.table
            tailed = (
                tables[table.store.name] if isinstance(table, TableNode) and not table.processed else None
            )
            steps.append((JOIN, proc.joiner, TableLookup(proc, tailed, node.key_serde)))
        elif type(proc) is SinkProcessor:
            return FusedChain(node, steps, proc, ctx, dead_letter, partition)
        elif type(proc) is AggregateProcessor or type(proc) is TimeWindowAggregateProcessor:
            if not proc.store.caching:
                return None
            return FusedChain(node, steps, proc, ctx, dead_letter, partition)
        else:
            return None
    return None
