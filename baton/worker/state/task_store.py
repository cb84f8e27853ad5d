"""A task's view of one state store: uncommitted updates in front of the persistent store.

Its jobs:

* **Isolation**: updates stay in memory (the *overlay*) until the commit that makes their
  changelog records durable has succeeded; only then are they written to RocksDB, with
  the checkpoint, in one batch. So the persistent store never gets ahead of committed
  data, and an aborted transaction is undone by dropping the overlay.
* **Collapsing** (the write cache, on by default): repeated updates of a key are kept as
  one dirty entry, and only its latest value is logged to the changelog and forwarded
  downstream at flush time, as Kafka Streams' record cache does. With the cache off,
  every update is logged and forwarded at once (one output per input record).
* **Read cache**: after a commit the overlay equals RocksDB for its keys and is kept, within
  the same budget, so a key updated in every interval is read from RocksDB once, not once
  per interval.
* **Pipelined commits**: ``begin_commit`` sets aside what the commit being made logged
  (*committing*), and ``commit`` persists exactly that, so the next interval's updates may
  start while the exactly-once commit still waits on the broker (``runtime/commit.py``).
  Until then the overlay answers reads, and the logged-value lookups (a change's old value,
  a windowed store's stream time) look at *committing* before RocksDB.
* **Bounded**: all of a worker's stores share one ``CacheBudget`` (Kafka Streams'
  ``cache.max.bytes.buffering``). A put that takes the total over it flushes the store it
  wrote to (its dirty entries are logged and forwarded at once, mid-interval), as Kafka
  Streams evicts from the cache being written, so many hot keys cannot grow the cache
  without bound between commits. Sizes are estimates (key bytes, the value's shallow size
  and a fixed per-entry overhead): values are only serialized when flushed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from baton.worker.state.stores import KeyValueStore
from baton.worker.topology.changes import Change
from baton.worker.topology.context import RecordContext, Send
from baton.worker.topology.graph import StoreSpec

MISSING: Any = object()
# In the overlay: deleted since the last commit (the persistent store may still hold the key).
DELETED: Any = object()


# A dirty entry: (key, value, topic, partition, offset, timestamp) of its latest update. A
# tuple built in place, not an object: one per put, and a class's __init__ call cost 15 % of
# the click counter's processing.
_Dirty = tuple[Any, Any, str, int, int, int]


ENTRY_OVERHEAD = 120  # bytes a dirty entry costs beyond its key and value: dict slots, the tuple


# What a committed value kept for reads costs, for the budget: its overlay slot, key and value.
RETAINED_ENTRY_BYTES = ENTRY_OVERHEAD + 40


class CacheBudget:
    """The write cache's size limit, shared by every store of one worker process.

    The same number of bytes also bounds the committed values stores keep in memory for
    reads (``retained``, in entries), like the clean entries of Kafka Streams' record cache.
    """

    __slots__ = ("limit", "retain_limit", "retained", "used")

    def __init__(self, limit: int, *, retain: bool = True) -> None:
        self.limit = limit
        self.used = 0
        self.retained = 0
        self.retain_limit = limit // RETAINED_ENTRY_BYTES if retain else 0


def entry_size(key_bytes: bytes, value: Any) -> int:
    """An estimate of what one dirty entry holds in memory (type checks by identity: a put's cost)."""
    kind = type(value)
    if kind is int or kind is float or kind is bool or value is None:
        value_size = 8
    elif kind is bytes or kind is str:
        value_size = len(value)
    else:
        value_size = sys.getsizeof(value)
    return len(key_bytes) + value_size + ENTRY_OVERHEAD


class TaskStore:
    """The store as processors see it: ``get``/``put`` of objects by serialized key.

    Putting ``None`` deletes the key, as in Kafka Streams (an aggregator that returns null):
    the changelog gets a tombstone and downstream gets ``(key, None)``.
    """

    def __init__(
        self,
        *,
        spec: StoreSpec,
        persistent: KeyValueStore,
        changelog_topic: str,
        partition: int,
        send: Send,
        ctx: RecordContext,
        send_covered: Send | None = None,
        caching: bool,
        budget: CacheBudget | None = None,
    ) -> None:
        self.spec = spec
        self.persistent = persistent
        self.changelog_topic = changelog_topic
        self.partition = partition
        self._send = send
        # for a flushed changelog record that a later one of the same flush follows (``Output.send_covered``)
        self._send_covered = send if send_covered is None else send_covered
        self._ctx = ctx
        # caching, overlay, dirty, dirty_bytes, budget: public because the fused loop of a
        # source feeding an aggregation (runtime/fused.py) inlines ``put`` on them
        self.caching = caching
        self._serialize = spec.value_serde.serialize
        self._deserialize = spec.value_serde.deserialize
        self.overlay: dict[bytes, Any] = {}
        self.dirty: dict[bytes, _Dirty] = {}
        # without a worker's budget (a replay, a test): no size limit, and nothing kept for reads
        self.budget = budget if budget is not None else CacheBudget(sys.maxsize, retain=False)
        self.dirty_bytes = 0  # this store's share of the budget
        self._retained = 0  # this store's share of the budget's retained entries
        self._pending: dict[bytes, bytes | None] = {}  # logged since the last begin_commit
        self._committing: dict[bytes, bytes | None] = {}  # logged by the commit in flight
        self._flushing: dict[bytes, _Dirty] = {}  # the entries a flush is logging right now
        self.forward: Callable[[Any, Any], None] = lambda _k, _v: None
        # set when the one thing downstream is a sink that would serialize key and value to
        # the bytes the changelog got: it takes those instead (no forward, no serde calls)
        self.forward_serialized: Callable[[bytes, bytes | None], None] | None = None
        # forward ``Change(new, old)`` instead of the new value: a table operation consumes
        # this store's updates (old is the value before, as of the last flush or commit)
        self.forward_changes = False
        # called at the start of every flush: an aggregation saves its stream time there
        self.before_flush: Callable[[], None] | None = None
        # called when uncommitted updates are dropped: an aggregation forgets what it derived from them
        self.after_discard: Callable[[], None] | None = None
        # called with the error when forwarding a flushed entry fails downstream (dead-letter it)
        self.on_flush_error: Callable[[Exception], None] = _reraise

    def get(self, key: bytes) -> Any:
        """The current value (uncommitted updates included), or ``MISSING``."""
        value = self.overlay.get(key, MISSING)
        if value is DELETED:
            return MISSING
        if value is not MISSING:
            return value
        raw = self.persistent.get(key)
        return MISSING if raw is None else self._deserialize(raw)

    def put(self, key_bytes: bytes, key: Any, value: Any) -> None:
        self.overlay[key_bytes] = DELETED if value is None else value
        if self.caching:
            ctx = self._ctx
            dirty = self.dirty
            if key_bytes not in dirty:  # a key updated again keeps its first estimate
                size = entry_size(key_bytes, value)
                self.dirty_bytes += size
                self.budget.used += size
            dirty[key_bytes] = (
                key,
                value,
                ctx.topic,
                ctx.partition,
                ctx.offset,
                ctx.timestamp,
            )
            budget = self.budget
            if budget.used > budget.limit:
                self.flush()
        else:
            self._log_and_forward(key_bytes, key, value)

    def _log_and_forward(self, key_bytes: bytes, key: Any, value: Any) -> None:
        change = Change(value, self._logged(key_bytes)) if self.forward_changes else None
        raw = None if value is None else self._serialize(value)
        self._pending[key_bytes] = raw
        self._send(self.changelog_topic, key_bytes, raw, self.partition, self._ctx.timestamp, None)
        self.forward(key, value if change is None else change)

    def _logged(self, key_bytes: bytes) -> Any:
        """The value last logged for a key (pending or persisted), None if absent: a change's old value."""
        raw = self._logged_raw(key_bytes)
        return None if raw is None else self._deserialize(raw)

    def _logged_raw(self, key: bytes) -> bytes | None:
        if key in self._pending:
            return self._pending[key]
        if key in self._committing:
            return self._committing[key]
        return self.persistent.get(key)

    def get_meta(self, key: bytes) -> bytes | None:
        """A raw entry the store's owner keeps beside its data (a windowed store's stream time)."""
        return self._logged_raw(key)

    def put_meta(self, key: bytes, raw: bytes) -> None:
        """Log a raw entry: durable with the next commit, never forwarded, no value serde."""
        self._pending[key] = raw
        self._send(self.changelog_topic, key, raw, self.partition, self._ctx.timestamp, None)

    def expire(self, keys: list[bytes]) -> None:
        """Delete windows past retention: a tombstone in the changelog, nothing forwarded.

        A window still dirty in the cache is flushed first, so its last update is logged
        (and forwarded) before its tombstone, never after it.
        """
        if self.caching:
            dirty = self.dirty
            stale = [k for k in keys if k in dirty]
            if stale:
                self.flush(stale)
        overlay, pending, send = self.overlay, self._pending, self._send
        for key_bytes in keys:
            overlay[key_bytes] = DELETED
            pending[key_bytes] = None
            send(self.changelog_topic, key_bytes, None, self.partition, self._ctx.timestamp, None)

    def flush(self, keys: list[bytes] | None = None) -> None:
        """Log and forward the latest value of every dirty key, each under its own record context.

        ``keys``: only those of them (an expiry's windows). Flushing the whole cache there
        emptied it whenever a window still dirty expired, which for sliding windows is nearly
        every record: the cache then collapsed nothing (docs/benchmarks.md, "Measured design choices": window-reads).
        """
        if self.before_flush is not None:
            self.before_flush()
        if not self.dirty:
            return
        if keys is None:
            dirty, self.dirty = self.dirty, {}
            self._release()
        else:
            dirty = {k: self.dirty.pop(k) for k in keys if k in self.dirty}
            if not self.dirty:
                self._release()
            else:  # each entry's estimate again (a key updated again kept its first one)
                freed = min(self.dirty_bytes, sum(entry_size(k, entry[1]) for k, entry in dirty.items()))
                self.dirty_bytes -= freed
                self.budget.used -= freed
        ctx = self._ctx
        saved = (
            ctx.topic,
            ctx.partition,
            ctx.offset,
            ctx.timestamp,
        )
        self._flushing = dirty  # a pipelined commit may finish mid-flush: see _forget_retained
        serialize, pending, send, forward = self._serialize, self._pending, self._send, self.forward
        forward_serialized = None if self.forward_changes else self.forward_serialized
        covered, last = self._send_covered, len(dirty)
        topic, partition = self.changelog_topic, self.partition
        olds = {k: self._logged(k) for k in dirty} if self.forward_changes else None
        try:
            for n, (key_bytes, entry) in enumerate(dirty.items(), 1):
                (
                    key,
                    value,
                    ctx.topic,
                    ctx.partition,
                    ctx.offset,
                    ctx.timestamp,
                ) = entry
                # _log_and_forward, inlined: one call less per flushed entry
                raw = None if value is None else serialize(value)
                pending[key_bytes] = raw
                try:
                    (send if n == last else covered)(topic, key_bytes, raw, partition, ctx.timestamp, None)
                    if forward_serialized is not None:
                        forward_serialized(key_bytes, raw)
                    else:
                        forward(key, value if olds is None else Change(value, olds[key_bytes]))
                except Exception as exc:
                    self.on_flush_error(exc)
        finally:
            self._flushing = {}
            (
                ctx.topic,
                ctx.partition,
                ctx.offset,
                ctx.timestamp,
            ) = saved

    def begin_commit(self) -> None:
        """The commit is made of what was logged so far; later updates belong to the next one."""
        assert not self._committing, "a commit began before the one in flight finished"
        self._committing, self._pending = self._pending, {}

    def commit(self, checkpoint: int | None) -> None:
        """The commit begun last is durable: persist what it logged with the checkpoint, atomically.

        The overlay now holds what RocksDB holds for its keys, or newer values of the next
        interval, so it stays as a read cache while the budget allows: the next interval's
        updates of the same keys skip a RocksDB read and a deserialization (a key's first
        update in each commit interval used to pay both). Past the budget it is dropped,
        all but the values the next commit has yet to log.
        """
        if self._committing or checkpoint is not None:
            self.persistent.write(self._committing.items(), checkpoint)
        self._committing = {}
        budget = self.budget
        grown = len(self.overlay) - self._retained
        if budget.retained + grown > budget.retain_limit:
            self._forget_retained(keep_uncommitted=True)
        else:
            budget.retained += grown
            self._retained += grown

    def discard(self) -> None:
        """Forget everything since the last commit (aborted transaction, lost task)."""
        self._forget_retained()
        self.dirty.clear()
        self._release()
        self._pending.clear()
        self._committing = {}
        if self.after_discard is not None:
            self.after_discard()

    def _forget_retained(self, keep_uncommitted: bool = False) -> None:
        """Drop the overlay's committed values (all of it, or all but the uncommitted ones).

        After a pipelined commit the overlay also holds updates made since it began: in
        dirty entries, logged ones (pending) or, when the commit finished during a flush
        (a send waits for it), entries that flush has taken but not logged yet. Those are
        the only copies of values RocksDB does not have, so they stay.
        """
        overlay = self.overlay  # changed in place: a flush or an expiry may hold it in a local
        if keep_uncommitted and (self.dirty or self._pending or self._flushing):
            keep = self.dirty.keys() | self._pending.keys() | self._flushing.keys()
            for key in [k for k in overlay if k not in keep]:
                del overlay[key]
        else:
            overlay.clear()
        self.budget.retained -= self._retained
        self._retained = 0

    def _release(self) -> None:
        """The dirty entries are gone (flushed or dropped): give their bytes back."""
        self.budget.used -= self.dirty_bytes
        self.dirty_bytes = 0


def _reraise(exc: Exception) -> None:
    raise exc
