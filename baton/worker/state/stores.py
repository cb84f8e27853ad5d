"""Persistent key-value stores holding bytes, with the changelog checkpoint inside them.

Every write is a batch that carries, next to the data, the changelog offset the store
reflects after the batch (the next offset to read). RocksDB applies a batch atomically,
so the data and the checkpoint can never disagree: after a crash the store is exactly
at its checkpoint and a restore replays only the changelog after it. This is the
difference with Kafka Streams, whose ``.checkpoint`` file is separate from the data and
which therefore wipes the store after an unclean shutdown under exactly-once.

What offset is safe to put in the batch is the caller's business (see ``commit.py``);
this module only guarantees atomicity.
"""

from __future__ import annotations

import shutil
import struct
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path

from rocksdict import Options, Rdict, WriteBatch

_CHECKPOINT_KEY = b"changelog-offset"
_META_CF = "baton-meta"
_OFFSET = struct.Struct(">q")

# What a store reports to Prometheus (runtime/store_metrics.py): statistic -> RocksDB property.
ROCKSDB_STATS = {
    "estimated_keys": "rocksdb.estimate-num-keys",
    "sst_bytes": "rocksdb.total-sst-files-size",
    "memtable_bytes": "rocksdb.cur-size-all-mem-tables",
    "block_cache_usage_bytes": "rocksdb.block-cache-usage",
    "block_cache_capacity_bytes": "rocksdb.block-cache-capacity",
    "pending_compaction_bytes": "rocksdb.estimate-pending-compaction-bytes",
    "compaction_pending": "rocksdb.compaction-pending",
}


class KeyValueStore(ABC):
    """Bytes to bytes, plus the changelog offset the content reflects.

    ``generation`` counts the writes and wipes: a reader that keeps what it read (the fused
    loop's rows of a tailed table, ``runtime/fused_chain.py``) knows by it when to forget.
    """

    generation = 0

    @abstractmethod
    def get(self, key: bytes) -> bytes | None: ...

    @abstractmethod
    def write(self, items: Iterable[tuple[bytes, bytes | None]], checkpoint: int | None) -> None:
        """Apply puts (value) and deletes (None) and the new checkpoint, all or nothing."""

    @abstractmethod
    def checkpoint(self) -> int | None:
        """Next changelog offset to read, or None if the store has never been written."""

    @abstractmethod
    def items(self) -> Iterator[tuple[bytes, bytes]]: ...

    def range(self, low: bytes | None, high: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """Up to ``limit`` entries with ``low <= key <= high`` (bytes order; None: unbounded)."""
        out = []
        for key, value in sorted(self.items()):
            if (low is None or key >= low) and (high is None or key <= high):
                out.append((key, value))
                if len(out) >= limit:
                    break
        return out

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def wipe(self) -> None:
        """Delete all content and the checkpoint (full restore follows)."""

    def stats(self) -> dict[str, int]:
        """Size statistics for the metrics endpoint (a thread of its own); empty once closed."""
        return {}


class MemoryStore(KeyValueStore):
    """A dict: empty at every start, so every start restores the whole changelog."""

    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._checkpoint: int | None = None

    def get(self, key: bytes) -> bytes | None:
        return self._data.get(key)

    def write(self, items: Iterable[tuple[bytes, bytes | None]], checkpoint: int | None) -> None:
        for key, value in items:
            if value is None:
                self._data.pop(key, None)
            else:
                self._data[key] = value
        if checkpoint is not None:
            self._checkpoint = checkpoint
        self.generation += 1

    def checkpoint(self) -> int | None:
        return self._checkpoint

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return iter(list(self._data.items()))

    def close(self) -> None:
        self._data.clear()

    def stats(self) -> dict[str, int]:
        return {"estimated_keys": len(self._data)}

    def wipe(self) -> None:
        self._data.clear()
        self._checkpoint = None
        self.generation += 1


class RocksDBStore(KeyValueStore):
    """RocksDB through rocksdict, data in the default column family, checkpoint in another.

    Two threads touch a store while its task restores: the restorer, which may wipe it (a
    checkpoint outside the changelog, a snapshot that failed to load), and the processing
    thread, which reads every open store's checkpoint for the offset sums it reports to the
    group. A wipe closes and reopens the database, so those two hold one lock: an offset
    sum read in between met a closed store and the worker crashed (seen after an aborted
    exactly-once commit, tests/integration/test_membership_lost_mid_join.py).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        path.parent.mkdir(parents=True, exist_ok=True)
        self._open()

    def _open(self) -> None:
        options = Options(raw_mode=True)
        options.create_if_missing(True)
        options.create_missing_column_families(True)
        self._db = Rdict(str(self.path), options=options, column_families={_META_CF: Options(raw_mode=True)})
        self._meta = self._db.get_column_family_handle(_META_CF)
        self._meta_view = self._db.get_column_family(_META_CF)
        self._closed = False

    def get(self, key: bytes) -> bytes | None:
        value: bytes | None = self._db.get(key)
        return value

    def write(self, items: Iterable[tuple[bytes, bytes | None]], checkpoint: int | None) -> None:
        batch = WriteBatch(raw_mode=True)
        for key, value in items:
            if value is None:
                batch.delete(key)
            else:
                batch.put(key, value)
        if checkpoint is not None:
            batch.put(_CHECKPOINT_KEY, _OFFSET.pack(checkpoint), self._meta)
        self._db.write(batch)
        self.generation += 1

    def checkpoint(self) -> int | None:
        with self._lock:
            raw: bytes | None = self._meta_view.get(_CHECKPOINT_KEY)
        return None if raw is None else int(_OFFSET.unpack(raw)[0])

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        for key, value in self._db.items():
            assert isinstance(key, bytes) and isinstance(value, bytes)
            yield key, value

    def range(self, low: bytes | None, high: bytes | None, limit: int) -> list[tuple[bytes, bytes]]:
        """A seek to ``low``, then keys in RocksDB's (bytes) order until ``high``."""
        out: list[tuple[bytes, bytes]] = []
        for key, value in self._db.items(from_key=low) if low is not None else self._db.items():
            assert isinstance(key, bytes) and isinstance(value, bytes)
            if (high is not None and key > high) or len(out) >= limit:
                break
            out.append((key, value))
        return out

    def close(self) -> None:
        with self._lock:
            self._close()

    def stats(self) -> dict[str, int]:
        """RocksDB's own estimates, read under the lock a wipe or close takes (the scrape's
        thread must not meet a closed database)."""
        with self._lock:
            if self._closed:
                return {}
            out = {}
            for name, prop in ROCKSDB_STATS.items():
                value = self._db.property_int_value(prop)
                if value is not None:
                    out[name] = int(value)
            return out

    def _close(self) -> None:
        del self._meta_view, self._meta
        self._db.close()
        self._closed = True

    def wipe(self) -> None:
        with self._lock:
            self._close()
            shutil.rmtree(self.path, ignore_errors=True)
            self._open()
            self.generation += 1
