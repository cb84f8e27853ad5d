"""Changelog snapshots written by the compactor: the layout, and loading one into a store.

A restore from scratch replays the whole changelog, including every update Kafka has
not compacted yet (the active segment never is). The compactor (``baton compact``)
writes, per changelog partition, the latest value of every key up to an offset; a task
restoring from scratch bulk-loads the newest such snapshot, takes its offset as the
store checkpoint, and replays only the changelog after it.

Layout, shared with the compactor (this module is the single definition)::

    <store-uri>/<application.id>/<store>/<partition>/snapshot-<end offset, 20 digits>/
        part-*.parquet   columns key, value (binary); no tombstones
        _baton.json      {"topic", "partition", "end_offset", "records", "created_at", ...}

``end_offset`` is exclusive: the first changelog offset the snapshot does NOT cover. The
manifest is written last, so a directory without one is an unfinished snapshot and is
ignored: the manifest is the commit. Workers have no Spark: Parquet is read with pyarrow,
one record batch at a time, so a restore's memory does not grow with the snapshot.

Only local paths (``/x`` or ``file:///x``, e.g. a shared volume) are read today; other
URIs (s3a://, hdfs://) need a filesystem behind ``_local`` and are refused clearly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from baton.worker.stores import KeyValueStore

log = logging.getLogger(__name__)

MANIFEST = "_baton.json"
# Written by each later compactor run that found the changelog's end still at end_offset:
# {"checked_at": <that run's start>}. Records after end_offset are younger than it.
CHECKED = "_checked.json"
# Clock skew between the compactor's and the worker's machines that the horizon tolerates.
SKEW_MARGIN_S = 300.0
PREFIX = "snapshot-"
BATCH = 10_000


def partition_dir(root: str, application_id: str, store: str, partition: int) -> str:
    return f"{root.rstrip('/')}/{application_id}/{store}/{partition}"


def snapshot_name(end_offset: int) -> str:
    return f"{PREFIX}{end_offset:020d}"


def end_of(name: str) -> int | None:
    """``snapshot-00000000000000001234`` -> 1234; None for anything else."""
    if not name.startswith(PREFIX):
        return None
    digits = name[len(PREFIX) :]
    return int(digits) if digits.isdigit() else None


@dataclass(frozen=True)
class Snapshot:
    path: Path
    topic: str
    partition: int
    end_offset: int
    records: int
    manifest: dict[str, Any]


def _local(root: str) -> Path:
    parsed = urlparse(root)
    if parsed.scheme in ("", "file"):
        return Path(parsed.path if parsed.scheme else root)
    raise ValueError(f"snapshot store {root!r}: only local paths are readable by workers for now")


def snapshots(root: str, application_id: str, store: str, partition: int) -> list[Snapshot]:
    """Complete snapshots of one changelog partition, newest first."""
    base = _local(partition_dir(root, application_id, store, partition))
    if not base.is_dir():
        return []
    out = []
    for child in base.iterdir():
        end = end_of(child.name)
        manifest_path = child / MANIFEST
        if end is None or not manifest_path.is_file():
            continue
        manifest = json.loads(manifest_path.read_text())
        out.append(
            Snapshot(
                child,
                manifest["topic"],
                int(manifest["partition"]),
                int(manifest["end_offset"]),
                int(manifest["records"]),
                manifest,
            )
        )
    return sorted(out, key=lambda s: s.end_offset, reverse=True)


def freshness(created_at: Any, checked_at: Any = None) -> float | None:
    """Unix time before which no changelog record after a snapshot's ``end_offset`` was written.

    The job takes end offsets after it starts, so every record at or after ``end_offset``
    was written after the manifest's ``created_at``; a later run that found the same end
    says the same from its own start (``_checked.json``'s ``checked_at``).
    """
    times = [
        datetime.fromisoformat(str(s).replace("Z", "+00:00")).timestamp()
        for s in (created_at, checked_at)
        if s
    ]
    return max(times) if times else None


def fresh_as_of(snap: Snapshot) -> float | None:
    """:func:`freshness` of a snapshot on a local path."""
    checked_at = None
    checked = snap.path / CHECKED
    if checked.is_file():
        with contextlib.suppress(OSError, ValueError):  # unreadable: the manifest's own time holds
            checked_at = json.loads(checked.read_text()).get("checked_at")
    return freshness(snap.manifest.get("created_at"), checked_at)


def horizon_holds(fresh: float | None, delete_retention_ms: int | None, now: float) -> bool:
    """Whether every tombstone written after a snapshot fresh as of ``fresh`` is surely still in the changelog.

    The snapshot leaves out keys deleted before ``end_offset``; a key deleted after it is
    deleted again by replaying its tombstone. The log cleaner may drop a tombstone once
    ``delete.retention.ms`` has passed, and with it the last trace of the delete: a restore
    (or an incremental compaction) from an older snapshot would bring the key back.
    Unknown retention or age: not usable.
    """
    if delete_retention_ms is None or fresh is None:
        return False
    return now - fresh < delete_retention_ms / 1000 - SKEW_MARGIN_S


def within_tombstone_horizon(snap: Snapshot, delete_retention_ms: int | None, now: float) -> bool:
    return horizon_holds(fresh_as_of(snap), delete_retention_ms, now)


def newest(
    root: str, application_id: str, store: str, partition: int, *, low: int = 0, high: int | None = None
) -> Snapshot | None:
    """The newest snapshot a restore can start from: its offset must lie within the changelog's [low, high].

    A snapshot beyond ``high`` describes a changelog that was since recreated; one below
    ``low`` would miss records that were deleted (a compacted changelog never moves
    ``low`` past a live record, but a misconfigured one with retention does).
    """
    for snap in snapshots(root, application_id, store, partition):
        if (high is None or snap.end_offset <= high) and snap.end_offset >= low:
            return snap
    return None


def read(snap: Snapshot, batch: int = BATCH) -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) pairs of a snapshot, file by file, ``batch`` rows in memory at a time."""
    import pyarrow.parquet as pq

    for part in sorted(snap.path.glob("*.parquet")):
        with pq.ParquetFile(part) as parquet:
            for rows in parquet.iter_batches(batch_size=batch, columns=["key", "value"]):
                keys, values = rows.column(0).to_pylist(), rows.column(1).to_pylist()
                for key, value in zip(keys, values, strict=True):
                    if key is not None and value is not None:
                        yield key, value


def load_into(store: KeyValueStore, snap: Snapshot, batch: int = BATCH) -> int:
    """Write a snapshot into an empty store; the checkpoint becomes its end offset, in the last batch.

    Until that last batch the store has no checkpoint, so a crash midway makes the next
    start load the snapshot again over a store that holds only snapshot keys: no harm.
    """
    items: list[tuple[bytes, bytes | None]] = []
    count = 0
    for pair in read(snap, batch):
        items.append(pair)
        if len(items) >= batch:
            store.write(items, None)
            count += len(items)
            items = []
    store.write(items, snap.end_offset)
    return count + len(items)


def seeder(
    root: str,
    application_id: str,
    changelog: Callable[[str], str],
    delete_retention_ms: Callable[[str], int | None],
) -> Callable[[Any, int, int], int | None]:
    """For the restore thread: ``seed(job, low, high)`` loads the newest usable snapshot, returns its offset.

    ``job`` is a ``restore.RestoreJob`` of a store with no checkpoint; jobs that do not read
    the store's own changelog (tables read from a source topic) are left alone. A snapshot
    past the changelog's tombstone horizon (:func:`within_tombstone_horizon`) is not used.
    """

    def seed(job: Any, low: int, high: int) -> int | None:
        if job.topic != changelog(job.store_name):
            return None
        try:
            snap = newest(root, application_id, job.store_name, job.partition, low=low, high=high)
            if snap is None:
                return None
            retention = delete_retention_ms(job.topic)
            if not within_tombstone_horizon(snap, retention, time.time()):
                log.warning(
                    "snapshot too old to restore from: deletes after it may be gone from the changelog; "
                    "restoring from the changelog alone",
                    extra={
                        "task": str(job.task),
                        "store": job.store_name,
                        "partition": job.partition,
                        "snapshot": str(snap.path),
                        "fresh_as_of": fresh_as_of(snap),
                        "delete_retention_ms": retention,
                    },
                )
                return None
            loaded = load_into(job.store, snap)
        except Exception:  # a bad snapshot must never stop a restore: the changelog alone is enough
            log.exception(
                "snapshot load failed; restoring from the changelog",
                extra={"store": job.store_name, "partition": job.partition},
            )
            job.store.wipe()
            return None
        log.info(
            "store loaded from snapshot",
            extra={
                "task": str(job.task),
                "store": job.store_name,
                "snapshot": str(snap.path),
                "records": loaded,
                "end_offset": snap.end_offset,
            },
        )
        return snap.end_offset

    return seed
