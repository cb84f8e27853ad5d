"""A source that feeds an aggregation directly, run as one loop: the click counter's shape.

``stream(...).group_by_key().count()`` (``aggregate`` and ``reduce`` too) is the most
common stateful topology there is, and on the general path (``Task.process_run``) each of
its records costs seven Python calls besides the user's aggregator: the key's and the
value's deserializer, the forward to the aggregation, the key's serialization, the store's
``get`` and ``put``, and the put's size estimate. This loop does the same work in one
frame: it calls the serdes' C functions directly (``serdes.fast_deserializer``), reuses
the record's key bytes as the store key when the serde round-trips them, and folds into
the write cache in place. A count, which never reads its values, only checks them: a
pydantic model's value is validated without building the instance
(``serdes.checking_deserializer``). Measured on the click counter's records with no broker, the
best runs took 4.8-4.9 µs a record on the general path and 4.2-4.5 µs on this one; with
the broker, one worker needed 7-30 % less CPU a record (docs/benchmarks.md, "Measured design
choices": fused-loop).

It changes nothing a user sees. Records go one by one, in offset order, each through the
aggregator before the next; the write cache holds the same dirty entries (the latest
update's record context) and flushes at the same points; a null key or value is skipped as
``AggregateProcessor`` skips it. What this loop does not handle it hands back:

* a record whose key or value the serdes' C functions refuse, or whose timestamp the
  extractor refuses, is processed by the general path, which runs the serdes' own
  ``deserialize``: it processes what they accept and dead-letters the rest with their own
  message (the C functions' errors are not worded for users); deserializers are pure, so
  running one again changes nothing;
* an aggregator that returns ``None`` (a delete) goes through ``TaskStore.put``;
* a failing initializer or aggregator is dead-lettered here, exactly once, as the general
  path does (a user's function is not run twice).

A source whose one child is a plain ``AggregateProcessor`` over a caching store (directly,
or through the pass-through of a ``merge``) is fused
(``fuse``): an input topic, or the repartition topic of a ``group_by``. A line of stateless steps into a sink or a (windowed) aggregation is
``fused_chain.FusedChain``'s; sub-topologies with custom processors (punctuators need stream
time), sessions, table aggregations and uncached stores keep the general path. ``TaskStore.put`` stays the
reference for what a fold does to the store: ``tests/unit/worker/runtime/test_fused_model.py`` runs
random inputs through both paths and compares every output and every store.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from baton.worker.runtime import own_json
from baton.worker.runtime.processors.aggregate import AggregateProcessor
from baton.worker.runtime.processors.base import ProcessorNode, straight_processor
from baton.worker.runtime.producer import dead_letter_stage
from baton.worker.state.task_store import DELETED, MISSING, entry_size
from baton.worker.topology.context import RecordContext
from baton.worker.topology.counting import plus_one, reads_no_value
from baton.worker.topology.serdes import checking_deserializer, fast_deserializer, round_trips

if TYPE_CHECKING:
    from baton.worker.runtime.record import Message
    from baton.worker.runtime.task import DeadLetter
    from baton.worker.topology.graph import SourceNode


class FusedAggregate:
    """One source's records folded straight into its aggregation's write cache."""

    __slots__ = (
        "_aggregate",
        "_ctx",
        "_dead_letter",
        "_deserialize_key",
        "_deserialize_value",
        "_extract",
        "_key_is_raw",
        "_own_json",
        "_partition",
        "stopped",
    )

    def __init__(
        self,
        node: SourceNode,
        aggregate: AggregateProcessor,
        ctx: RecordContext,
        dead_letter: DeadLetter,
        partition: int,
    ) -> None:
        self._aggregate = aggregate
        self._partition = partition  # the task's: what the general path puts in the context
        self.stopped = 0  # where the last run stopped (see ``run``)
        self._ctx = ctx
        self._dead_letter = dead_letter
        self._deserialize_key = fast_deserializer(node.key_serde)
        self._extract = node.timestamp
        # a count never reads the value: only whether it is valid (a model's instance is not built)
        self._deserialize_value: Callable[[bytes], Any] = (
            checking_deserializer(node.value_serde)
            if reads_no_value(node, aggregate.aggregator)
            else fast_deserializer(node.value_serde)
        )
        # the record's key bytes are the store key when the store would serialize the key to
        # exactly those bytes again (same serde, and one that round-trips: str, bytes, long)
        store_serde = aggregate.store.spec.key_serde
        self._key_is_raw = type(store_serde) is type(node.key_serde) and round_trips(store_serde)
        # a count over Baton's own repartition topic of JSON takes a value as read, without
        # parsing it (``own_json``): a count never reads the value
        self._own_json = own_json.takes_as_read(node, aggregate.aggregator)

    def run(self, messages: Sequence[Message], start: int, stop: int) -> None:  # noqa: C901 - the per-record loop, inlined on purpose: each helper would be a call per record
        """Fold ``messages[start:stop]`` up to the end of the run or a record this loop hands back.

        ``stopped`` is the index it stopped at, also when the dead-letter handler raised (the
        fail handler: the records before that one stay processed): past the run (another
        partition or topic, a consumer error, ``stop``), or at a record the general path
        must process. The caller knows which by looking at that record, and keeps the
        task's positions.

        The per-record path of the most common topology: locals and inlined calls, written
        for CPython's speed (``TaskStore.put`` and ``AggregateProcessor.process`` say the
        same things plainly).
        """
        first = messages[start]
        topic, partition = first.topic(), first.partition()
        assert topic is not None and partition is not None
        ctx, own = self._ctx, self._partition
        ctx.topic = topic
        ctx.partition = own
        aggregate = self._aggregate
        store = aggregate.store
        initializer, aggregator = aggregate.initializer, aggregate.aggregator
        counting = aggregator is plus_one  # count(): its fold inlined (``topology/counting.py``)
        key_serialize, key_is_raw = aggregate.key_serialize, self._key_is_raw
        deserialize_key, deserialize_value = self._deserialize_key, self._deserialize_value
        extract, dead_letter = self._extract, self._dead_letter
        overlay, budget = store.overlay, store.budget  # the overlay is only ever changed in place
        overlay_get = overlay.get
        dirty = store.dirty  # a flush replaces it: read again after anything that may flush
        own_json_values = self._own_json
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
                    key = None if raw_key is None else deserialize_key(raw_key)
                    if raw_value is None:
                        value = None
                    elif own_json_values:  # own_json_value, inlined: the count never reads the value
                        value = None if raw_value == b"null" else raw_value
                    else:
                        value = deserialize_value(raw_value)
                    if extract is not None:
                        timestamp = extract(key, value, timestamp)
                        if timestamp < 0:
                            break
                except Exception:
                    break  # the general path runs the serde itself: it takes the record or dead-letters it
                if key is not None and value is not None:
                    try:
                        # a replayed bytearray is no store key (unhashable): serialized like any key
                        key_bytes = raw_key if key_is_raw and type(raw_key) is bytes else key_serialize(key)
                        current = overlay_get(key_bytes, MISSING)
                        if current is MISSING or current is DELETED:
                            current = store.get(key_bytes)
                            if current is MISSING:
                                current = initializer()
                        new = current + 1 if counting else aggregator(key, value, current)
                        if new is None:  # a delete
                            _set(ctx, offset, timestamp)
                            store.put(key_bytes, key, new)
                            dirty = store.dirty
                        else:  # TaskStore.put, inlined
                            overlay[key_bytes] = new
                            if key_bytes not in dirty:
                                size = entry_size(key_bytes, new)
                                store.dirty_bytes += size
                                budget.used += size
                            dirty[key_bytes] = (
                                key,
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
                    except Exception as exc:
                        _set(ctx, offset, timestamp)
                        dead_letter(exc, dead_letter_stage(exc), msg)
                        dirty = store.dirty
                done_offset, done_timestamp = offset, timestamp
                i += 1
        finally:
            self.stopped = i
            if i > start:  # where the general path leaves the context: at the last record processed
                _set(ctx, done_offset, done_timestamp)


def _set(ctx: RecordContext, offset: int, timestamp: int) -> None:
    """The record context of the record being folded, where something may read it."""
    ctx.offset = offset
    ctx.timestamp = timestamp


def fuse(
    node: SourceNode,
    root: ProcessorNode,
    ctx: RecordContext,
    dead_letter: DeadLetter,
    *,
    partition: int,
    custom: bool,
) -> FusedAggregate | None:
    """The fused loop for a source, when its records go straight into a cached aggregation."""
    child = None if custom else straight_processor(root)
    if type(child) is not AggregateProcessor or not child.store.caching:
        return None
    return FusedAggregate(node, child, ctx, dead_letter, partition)
