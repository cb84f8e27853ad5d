"""Latest value per key, the pure reference of what a compacted changelog holds.

Spark computes the same thing at scale (``frames.py``); this version defines the rule
(the highest offset wins; a tombstone, a null value, deletes the key) and serves tests,
the audit and the worker's expectations.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass
class PartitionStats:
    """What reading one changelog partition found.

    ``records``, ``tombstones`` and ``bytes`` are of the changelog records this run read
    (all of them, or those after its base snapshot); ``distinct_keys`` and ``live_keys`` are
    of the whole snapshot; ``live_read`` counts live keys whose value came from a record read.
    """

    records: int = 0
    tombstones: int = 0
    bytes: int = 0
    distinct_keys: int = 0
    live_keys: int = 0
    live_read: int | None = None  # None: every live key came from a record read (a full read)

    @property
    def compaction_lag(self) -> int:
        """Records read that the snapshot replaces: what a restore saves by loading it.

        For a full read, the records a restore from scratch reads that a fully compacted
        changelog would not hold; for an incremental run, the same of the changelog after
        the previous snapshot.
        """
        return self.records - (self.live_keys if self.live_read is None else self.live_read)


def latest_per_key(
    records: Iterable[tuple[int, bytes | None, bytes | None]],
) -> tuple[dict[bytes, bytes], PartitionStats]:
    """(offset, key, value) records of one partition, any order -> live key/values and statistics.

    Records without a key are not store updates (the worker skips them too) and are ignored.
    """
    last: dict[bytes, tuple[int, bytes | None]] = {}
    stats = PartitionStats()
    for offset, key, value in records:
        if key is None:
            continue
        stats.records += 1
        stats.bytes += len(key) + (0 if value is None else len(value))
        if value is None:
            stats.tombstones += 1
        seen = last.get(key)
        if seen is None or offset > seen[0]:
            last[key] = (offset, value)
    live = {k: v for k, (_o, v) in last.items() if v is not None}
    stats.distinct_keys = len(last)
    stats.live_keys = len(live)
    return live, stats
