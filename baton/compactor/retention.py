"""Which snapshots to delete: keep the newest N per partition (pure).

A snapshot is only useful if it is newer than what a restoring worker already has, so
older ones are dead weight; the few kept cover a snapshot written while a worker was
still loading the previous one.
"""

from __future__ import annotations

from collections.abc import Iterable


def to_delete(end_offsets: Iterable[int], keep: int) -> list[int]:
    """End offsets of the snapshots of one partition that fall outside the newest ``keep``."""
    if keep < 1:
        raise ValueError("keep at least one snapshot")
    ordered = sorted(set(end_offsets), reverse=True)
    return sorted(ordered[keep:])
