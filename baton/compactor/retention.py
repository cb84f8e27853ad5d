"""What a run deletes from the snapshot store (pure): old snapshots, old reports, crashed staging.

A snapshot is only useful if it is newer than what a restoring worker already has, so
older ones are dead weight; the few kept cover a snapshot written while a worker was
still loading the previous one. Only complete snapshots (with a manifest) of the
changelog as it is now count toward the number kept: a folder without a manifest is a
run that crashed half-way, and a snapshot of a deleted and recreated changelog can never
be used again; the job removes both.

A run stages its Parquet files under ``_staging/<UTC time>-<token>`` before moving them
into place. A crashed run leaves its folder behind; a later run removes staging folders
older than a day, never one that may belong to a run still going (two apps' CronJobs may
share a store).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

STAGING_AGE = timedelta(days=1)
REPORTS_KEPT = 10
_STAMP = "%Y%m%dT%H%M%SZ"
_STAGED = re.compile(r"^(\d{8}T\d{6}Z)-[0-9a-f]+$")
_REPORT = re.compile(r"^report-\d{8}T\d{6}.*\.json$")


def to_delete(end_offsets: Iterable[int], keep: int) -> list[int]:
    """End offsets of the snapshots of one partition that fall outside the newest ``keep``."""
    if keep < 1:
        raise ValueError("keep at least one snapshot")
    ordered = sorted(set(end_offsets), reverse=True)
    return sorted(ordered[keep:])


def staging_name(now: datetime, token: str) -> str:
    return f"{now.astimezone(UTC).strftime(_STAMP)}-{token}"


def stale_staging(names: Iterable[str], now: datetime) -> list[str]:
    """Staging folders a crashed run left: older than :data:`STAGING_AGE`, or named by an older release (no time)."""
    out = []
    for name in names:
        match = _STAGED.match(name)
        if match is None or now - datetime.strptime(match[1], _STAMP).replace(tzinfo=UTC) > STAGING_AGE:
            out.append(name)
    return sorted(out)


def old_reports(names: Iterable[str], keep: int = REPORTS_KEPT) -> list[str]:
    """``report-<time>.json`` files beyond the newest ``keep`` (their names sort by time)."""
    reports = sorted((n for n in names if _REPORT.match(n)), reverse=True)
    return sorted(reports[keep:])
