"""Changelog snapshots written by the compactor: the layout, and loading one into a store.

A restore from scratch replays the whole changelog, including every update Kafka has
not compacted yet (the active segment never is). The compactor (``baton compact``)
writes, per changelog partition, the latest value of every key up to an offset; a task
restoring from scratch bulk-loads the newest such snapshot, takes its offset as the
store checkpoint, and replays only the changelog after it.

Layout, shared with the compactor (this module is the single definition)::

    <store-uri>/<application.id>/<store>/<partition>/snapshot-<end offset, 20 digits>/
        part-*.parquet   columns key, value (binary); no tombstones
        _baton.json      {"topic", "topic_id", "partition", "end_offset", "records", "created_at", ...}

``end_offset`` is exclusive: the first changelog offset the snapshot does NOT cover. The
manifest is written last, so a directory without one is an unfinished snapshot and is
ignored: the manifest is the commit. Workers have no Spark: Parquet is read with pyarrow,
one record batch at a time, so a restore's memory does not grow with the snapshot.

The store is a local path (``/x``, ``file:///x``: a shared volume) or an object store
(``s3a://bucket/prefix``), read through pyarrow's filesystems (``snapshot_fs``). On an
object store the manifest is still the commit: each object appears whole, and the job
writes the manifest after every Parquet part.

``topic_id`` is the changelog's Kafka topic id when the snapshot was taken. Offsets alone
cannot tell a changelog that was deleted and recreated from the one a snapshot was taken
of (the new one may well have grown past the old end), so a snapshot is used only by the
same incarnation of the topic: same id. A manifest without one (an older compactor's) is
not used either; the next compaction run writes one with it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from baton.worker.state.snapshot_fs import open_store
from baton.worker.state.snapshot_uri import S3Settings
from baton.worker.state.stores import KeyValueStore

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
    path: str  # within ``filesystem``
    topic: str
    partition: int
    end_offset: int
    records: int
    manifest: dict[str, Any]
    filesystem: Any = None  # a pyarrow FileSystem; None: the local one

    @property
    def topic_id(self) -> str | None:
        value = self.manifest.get("topic_id")
        return str(value) if value else None


def _fs(snap: Snapshot) -> Any:
    if snap.filesystem is not None:
        return snap.filesystem
    from pyarrow import fs

    return fs.LocalFileSystem()


def _read_json(filesystem: Any, path: str) -> dict[str, Any] | None:
    """A JSON object stored at ``path``, or None when there is no such file."""
    from pyarrow import fs

    if filesystem.get_file_info(path).type != fs.FileType.File:
        return None
    with filesystem.open_input_stream(path) as stream:
        data: dict[str, Any] = json.loads(stream.read())
    return data


def snapshots(
    root: str, application_id: str, store: str, partition: int, s3: S3Settings | None = None
) -> list[Snapshot]:
    """Complete snapshots of one changelog partition, newest first."""
    from pyarrow import fs

    filesystem, base_root = open_store(root, s3)
    base = partition_dir(base_root, application_id, store, partition)
    out = []
    for child in filesystem.get_file_info(fs.FileSelector(base, allow_not_found=True)):
        if child.type != fs.FileType.Directory or end_of(child.base_name) is None:
            continue
        manifest = _read_json(filesystem, f"{child.path}/{MANIFEST}")
        if manifest is None:  # unfinished
            continue
        out.append(
            Snapshot(
                child.path,
                manifest["topic"],
                int(manifest["partition"]),
                int(manifest["end_offset"]),
                int(manifest["records"]),
                manifest,
                filesystem,
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
    """:func:`freshness` of a snapshot, with a later run's ``_checked.json`` if there is one."""
    checked_at = None
    with contextlib.suppress(OSError, ValueError):  # unreadable: the manifest's own time holds
        checked_at = (_read_json(_fs(snap), f"{snap.path}/{CHECKED}") or {}).get("checked_at")
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


def refusal(
    snapshot_topic_id: str | None, end_offset: int, *, topic_id: str | None, low: int, high: int | None
) -> str | None:
    """Why a snapshot cannot stand for the changelog's first ``end_offset`` records now; None if it can.

    It must be of this incarnation of the topic (same topic id) and its offset must lie
    within the changelog's [low, high]: past ``high`` it describes records that are gone;
    below ``low`` it would miss records that were deleted (a compacted changelog never
    moves ``low`` past a live record, but a misconfigured one with retention does).
    """
    if snapshot_topic_id is None:
        return "its manifest has no topic id (an older compactor wrote it), so the changelog it was taken of is unknown"
    if topic_id is None:
        return "the changelog's topic id could not be read (the principal needs Describe on the topic)"
    if snapshot_topic_id != topic_id:
        return (
            f"it was taken of another incarnation of the changelog (topic id {snapshot_topic_id}; the topic "
            f"now has {topic_id}): the changelog was deleted and recreated since"
        )
    if high is not None and end_offset > high:
        return f"its end offset {end_offset} is past the changelog's end {high}"
    if end_offset < low:
        return f"its end offset {end_offset} is below the changelog's first offset {low}: it misses removed records"
    return None


def choose(
    found: list[Snapshot], *, topic_id: str | None, low: int = 0, high: int | None = None
) -> tuple[Snapshot | None, list[tuple[Snapshot, str]]]:
    """The newest of ``found`` (newest first) that :func:`refusal` accepts, and why each newer one was not."""
    refused: list[tuple[Snapshot, str]] = []
    for snap in found:
        why = refusal(snap.topic_id, snap.end_offset, topic_id=topic_id, low=low, high=high)
        if why is None:
            return snap, refused
        refused.append((snap, why))
    return None, refused


def newest(
    root: str,
    application_id: str,
    store: str,
    partition: int,
    *,
    topic_id: str | None,
    low: int = 0,
    high: int | None = None,
    s3: S3Settings | None = None,
) -> Snapshot | None:
    """The newest snapshot a restore can start from (see :func:`refusal`)."""
    return choose(
        snapshots(root, application_id, store, partition, s3), topic_id=topic_id, low=low, high=high
    )[0]


def read(snap: Snapshot, batch: int = BATCH) -> Iterator[tuple[bytes, bytes]]:
    """The (key, value) pairs of a snapshot, file by file, ``batch`` rows in memory at a time."""
    import pyarrow.parquet as pq
    from pyarrow import fs

    filesystem = _fs(snap)
    parts = sorted(
        info.path
        for info in filesystem.get_file_info(fs.FileSelector(snap.path))
        if info.type == fs.FileType.File and info.base_name.endswith(".parquet")
    )
    for part in parts:
        with filesystem.open_input_file(part) as source, pq.ParquetFile(source) as parquet:
            for rows in parquet.iter_batches(batch_size=batch, columns=["key", "value"]):
                keys, values = rows.column(0).to_pylist(), rows.column(1).to_pylist()
                for key, value in zip(keys, values, strict=True):
                    if key is not None and value is not None:
                        yield key, value


def load_into(store: KeyValueStore, snap: Snapshot, batch: int = BATCH) -> int:
    """Write a snapshot into an empty store; the checkpoint becomes its end offset, in the last batch.

    Until that last batch the store has no checkpoint. A crash midway leaves keys without
    one, which the restorer wipes before it restores the store again (``restore.py``):
    loaded over them, a newer snapshot that no longer holds a key would leave it in place.
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
    *,
    topic_id: Callable[[str], str | None],
    s3: S3Settings | None = None,
) -> Callable[[Any, int, int], int | None]:
    """For the restore thread: ``seed(job, low, high)`` loads the newest usable snapshot, returns its offset.

    ``job`` is a ``restore.RestoreJob`` of a store with no checkpoint; jobs that do not read
    the store's own changelog (tables read from a source topic) are left alone. A snapshot
    of another incarnation of the changelog (:func:`refusal`), or past its tombstone
    horizon (:func:`within_tombstone_horizon`), is not used.
    """

    def seed(job: Any, low: int, high: int) -> int | None:
        if job.topic != changelog(job.store_name):
            return None
        try:
            found = snapshots(root, application_id, job.store_name, job.partition, s3)
            snap, refused = choose(found, topic_id=topic_id(job.topic), low=low, high=high)
            for old, why in refused:
                log.warning(
                    "snapshot refused",
                    extra={
                        "task": str(job.task),
                        "store": job.store_name,
                        "partition": job.partition,
                        "snapshot": old.path,
                        "reason": why,
                    },
                )
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
                        "snapshot": snap.path,
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
                "snapshot": snap.path,
                "records": loaded,
                "end_offset": snap.end_offset,
            },
        )
        return snap.end_offset

    return seed
