"""Which snapshot a run builds on, so it reads only the changelog written since.

A run that finds a usable snapshot of a changelog partition reads the snapshot (one row
per live key) and the changelog from the snapshot's end offset, and merges the two (the
newer record wins; a tombstone deletes). Its cost follows the new data and the number of
live keys, not the changelog's history. A partition whose changelog has not grown since
its newest snapshot is neither read nor written (``unchanged``): a run's cost follows the
partitions that changed.

A snapshot is usable as a base under the same rule a worker applies to restore from it
(``snapshot.refusal``): it was taken of this incarnation of the changelog (same topic id)
and its end lies within the changelog's current [low, high] (a changelog that was
recreated or lost records is read whole), and it is within the tombstone horizon. A key deleted
after the snapshot is gone from the merge only while its tombstone is still in the
changelog; the log cleaner drops tombstones after ``delete.retention.ms``, so an older
base could bring deleted keys back. Then the run reads the changelog from its start.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from baton.worker.state.snapshot import freshness, horizon_holds, refusal

INCREMENTAL = "incremental"
UNCHANGED = "unchanged"


@dataclass(frozen=True)
class Candidate:
    """A complete snapshot found in the store: its end offset and the times that vouch for it."""

    end_offset: int
    path: str
    created_at: Any = None
    checked_at: Any = None
    topic_id: str | None = None
    records: int = 0  # live keys


@dataclass(frozen=True)
class Plan:
    """What a run reads for one changelog partition: the changelog from ``read_from``, plus ``base`` if any."""

    read_from: int
    base: Candidate | None
    reason: str  # why the changelog is read whole, or INCREMENTAL, or UNCHANGED
    # snapshots that can never be used (path -> why), known only when the topic id is
    refused: dict[str, str] = field(default_factory=dict)

    @property
    def unchanged(self) -> bool:
        """Nothing to read or write: the base already covers the changelog's end."""
        return self.reason == UNCHANGED


def plan(
    candidates: list[Candidate],
    *,
    topic_id: str | None,
    low: int,
    high: int,
    delete_retention_ms: int | None,
    now: float,
) -> Plan:
    """The newest snapshot of this incarnation within [low, high] as the base, if within the tombstone horizon."""
    refused: dict[str, str] = {}
    usable = []
    for c in sorted(candidates, key=lambda c: c.end_offset, reverse=True):
        why = refusal(c.topic_id, c.end_offset, topic_id=topic_id, low=low, high=high)
        if why is None:
            usable.append(c)
        else:
            refused[c.path] = why
    gone = refused if topic_id is not None else {}
    if not usable:
        reasons = "; ".join(f"{path}: {why}" for path, why in refused.items())
        reason = "no snapshot yet" if not candidates else f"no usable snapshot ({reasons})"
        return Plan(low, None, reason, gone)
    newest = usable[0]
    if not horizon_holds(freshness(newest.created_at, newest.checked_at), delete_retention_ms, now):
        return Plan(
            low, None, "the newest snapshot is past the tombstone horizon (delete.retention.ms)", gone
        )
    return Plan(newest.end_offset, newest, UNCHANGED if newest.end_offset == high else INCREMENTAL, gone)


def retention_ms(configs: dict[str, str]) -> int | None:
    """The changelog's ``delete.retention.ms``; None (no base is safe) if the broker did not say."""
    value = configs.get("delete.retention.ms")
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
