"""Which snapshot a run builds on, so it reads only the changelog written since.

A run that finds a usable snapshot of a changelog partition reads the snapshot (one row
per live key) and the changelog from the snapshot's end offset, and merges the two (the
newer record wins; a tombstone deletes). Its cost follows the new data and the number of
live keys, not the changelog's history.

A snapshot is usable as a base under the same rule a worker applies to restore from it:
its end lies within the changelog's current [low, high] (a changelog that was recreated
or lost records is read whole), and it is within the tombstone horizon. A key deleted
after the snapshot is gone from the merge only while its tombstone is still in the
changelog; the log cleaner drops tombstones after ``delete.retention.ms``, so an older
base could bring deleted keys back. Then the run reads the changelog from its start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.worker.state.snapshot import freshness, horizon_holds


@dataclass(frozen=True)
class Candidate:
    """A complete snapshot found in the store: its end offset and the times that vouch for it."""

    end_offset: int
    path: str
    created_at: Any = None
    checked_at: Any = None


@dataclass(frozen=True)
class Plan:
    """What a run reads for one changelog partition: the changelog from ``read_from``, plus ``base`` if any."""

    read_from: int
    base: Candidate | None
    reason: str  # why the changelog is read whole, or "incremental"


def plan(
    candidates: list[Candidate],
    *,
    low: int,
    high: int,
    delete_retention_ms: int | None,
    now: float,
) -> Plan:
    """The newest snapshot within [low, high] as the base if it is within the tombstone horizon."""
    usable = [c for c in candidates if low <= c.end_offset <= high]
    if not usable:
        reason = "no snapshot yet" if not candidates else "no snapshot within the changelog's offsets"
        return Plan(low, None, reason)
    newest = max(usable, key=lambda c: c.end_offset)
    if not horizon_holds(freshness(newest.created_at, newest.checked_at), delete_retention_ms, now):
        return Plan(low, None, "the newest snapshot is past the tombstone horizon (delete.retention.ms)")
    return Plan(newest.end_offset, newest, "incremental")


def retention_ms(configs: dict[str, str]) -> int | None:
    """The changelog's ``delete.retention.ms``; None (no base is safe) if the broker did not say."""
    value = configs.get("delete.retention.ms")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
