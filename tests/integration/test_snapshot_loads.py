"""A worker loads only a snapshot of its changelog as it is now, and a crash in the load loses
nothing and brings nothing back (issue 46).

Real broker, real ``baton run`` workers of the click counter, real RocksDB stores. The
snapshots are written here with pyarrow in the compactor's layout (``snapshot.py``), so
each test controls exactly which snapshot exists when; the compactor's own writes are
covered by ``test_compactor_job.py``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from batondev.paths import CLICK_COUNTER
from confluent_kafka import KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from baton.clients.topic_ids import topic_ids
from baton.testing import WorkerProcess, latest_by_key, produce, read_all, wait_for
from baton.worker.config import env_var
from baton.worker.state import snapshot
from baton.worker.state.stores import RocksDBStore

pytestmark = pytest.mark.integration

STORE = "user-counts-store"
COMPACTED = {"cleanup.policy": "compact"}
KEYS = 35_000  # four load batches of snapshot.BATCH: three without a checkpoint, then the last

# Run in the worker before `baton run`: the process dies (as a SIGKILL would take it) right
# after the k-th batch a snapshot load wrote without a checkpoint.
CRASH_AFTER = """
import os
from baton.worker.state import stores
_write, _seen = stores.RocksDBStore.write, [0]
def _write_then_die(self, items, checkpoint):
    _write(self, items, checkpoint)
    if checkpoint is None:
        _seen[0] += 1
        if _seen[0] == {k}:
            os._exit(9)
stores.RocksDBStore.write = _write_then_die
"""


def _key(i: int) -> bytes:
    return b"k%05d" % i


class Changelog:
    """The click counter's store changelog (one partition), written directly, and what it holds."""

    def __init__(self, bootstrap: str, admin: AdminClient, app: str) -> None:
        self.bootstrap, self.admin, self.app = bootstrap, admin, app
        self.topic = f"{app}-{STORE}-changelog"
        self.clicks = f"{app}-clicks"  # the click counter's input: empty, the store is all there is

    def append(self, records: Sequence[tuple[bytes, bytes | None]]) -> int:
        """Append records; returns the changelog's end offset after them."""
        produce(self.bootstrap, self.topic, records)
        return self.end()

    def end(self) -> int:
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"{self.app}-probe"})
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(self.topic, 0), timeout=30)[1])
        finally:
            consumer.close()

    def content(self, below: int | None = None) -> dict[bytes, bytes]:
        """Live keys of the changelog (of its first ``below`` offsets): what a store must hold."""
        records = [r for r in read_all(self.bootstrap, self.topic) if below is None or r.offset < below]
        return {k: v for k, v in latest_by_key(records).items() if k is not None and v is not None}

    def topic_id(self) -> str:
        return topic_ids(self.admin, [self.topic])[self.topic]

    def snapshot(self, root: Path, end: int, topic_id: str | None = None) -> Path:
        """A snapshot of the first ``end`` offsets, in the compactor's layout; returns its folder."""
        content = self.content(below=end)
        folder = Path(snapshot.partition_dir(str(root), self.app, STORE, 0)) / snapshot.snapshot_name(end)
        folder.mkdir(parents=True)
        keys = sorted(content)
        table = pa.table(
            {"key": pa.array(keys, pa.binary()), "value": pa.array([content[k] for k in keys], pa.binary())}
        )
        pq.write_table(table, folder / "part-00000.parquet", row_group_size=5_000)
        manifest = {
            "format": 2,
            "topic": self.topic,
            "topic_id": topic_id or self.topic_id(),
            "partition": 0,
            "end_offset": end,
            "records": len(content),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        (folder / snapshot.MANIFEST).write_text(json.dumps(manifest))
        return folder

    def worker(self, tmp: Path, run: str, root: Path, prelude: str = "") -> WorkerProcess:
        """A click counter worker of this app with the snapshot store ``root`` and state ``tmp/run``."""
        return WorkerProcess(
            CLICK_COUNTER,
            bootstrap=self.bootstrap,
            application_id=self.app,
            state_dir=tmp / run,
            log_path=tmp / f"{run}.log",
            instance_id="w",
            env={
                "CLICKS_TOPIC": self.clicks,
                "COUNTS_TOPIC": f"{self.clicks}-counts",
                env_var("snapshot_store"): str(root),
            },
            prelude=prelude,
        )


def _store(tmp: Path, run: str, app: str) -> tuple[dict[bytes, bytes], int | None]:
    db = RocksDBStore(tmp / run / app / "0_0" / STORE)
    try:
        return dict(db.items()), db.checkpoint()
    finally:
        db.close()


@pytest.fixture
def log(
    kafka_bootstrap: str, kafka_admin: AdminClient, new_topic: Callable[..., str], unique_name: str
) -> Changelog:
    """A click counter app of one partition whose changelog the test writes."""
    changelog = Changelog(kafka_bootstrap, kafka_admin, unique_name)
    for topic in (changelog.clicks, f"{changelog.clicks}-counts"):
        new_topic(1, name=topic)
    new_topic(1, name=changelog.topic, config=COMPACTED)
    return changelog


def _messages(worker: WorkerProcess, msg: str) -> list[dict[str, Any]]:
    return [line for line in worker.logs() if line.get("msg") == msg]


def test_a_crash_at_any_batch_of_a_snapshot_load_resurrects_no_key_and_loses_none(
    log: Changelog, tmp_path: Path
) -> None:
    """The worker dies after k of the four batches of an older snapshot; a newer one (without
    the keys deleted in between) is published; the restarted worker must end with exactly the
    changelog's content. Before the fix it kept the deleted keys of the first k batches."""
    first = log.append([(_key(i), b"1") for i in range(KEYS)])
    deleted = {_key(i) for i in range(0, KEYS, 3)}  # spread over every batch of the load
    second = log.append(
        [(k, None) for k in sorted(deleted)]
        + [(_key(i), b"2") for i in range(1, KEYS, 5) if _key(i) not in deleted]
        + [(b"new%03d" % i, b"2") for i in range(100)]
    )
    # the tail after the newer snapshot: a restore replays it
    tail = [(_key(i), b"3") for i in range(1, KEYS, 7) if _key(i) not in deleted]
    log.append(tail + [(_key(i), None) for i in range(2, KEYS, 11)])
    expected = log.content()
    assert first == KEYS and not deleted & set(expected)

    for k in (1, 2, 3):
        root, run = tmp_path / f"snapshots-{k}", f"crash-after-{k}"
        log.snapshot(root, first)
        crashing = log.worker(tmp_path, run, root, CRASH_AFTER.format(k=k)).start()
        assert crashing.wait(120) == 9, f"the load never reached batch {k}"
        half, checkpoint = _store(tmp_path, run, log.app)
        assert checkpoint is None and len(half) == k * snapshot.BATCH
        assert deleted & set(half), "the half-loaded store holds keys deleted since"

        newer = log.snapshot(root, second)
        worker = log.worker(tmp_path, run, root).start()
        worker.wait_ready(120)
        assert worker.stop() == 0
        assert _messages(worker, "store holds data but no checkpoint; wiping")
        loaded = _messages(worker, "store loaded from snapshot")
        assert [line["snapshot"] for line in loaded] == [str(newer)]
        content, checkpoint = _store(tmp_path, run, log.app)
        assert not deleted & set(content), f"k={k}: deleted keys came back"
        assert content == expected, f"k={k}"
        assert checkpoint == log.end()


def test_a_snapshot_of_a_deleted_and_recreated_changelog_is_refused(
    log: Changelog, kafka_admin: AdminClient, new_topic: Callable[..., str], tmp_path: Path
) -> None:
    """Offsets cannot tell the two apart: the new changelog has grown past the old snapshot's
    end. The topic id in the manifest can, and the worker says so and restores from the
    changelog alone."""
    end = log.append([(_key(i), b"old") for i in range(50)])
    old_id = log.topic_id()
    root = tmp_path / "snapshots"
    log.snapshot(root, end, old_id)

    kafka_admin.delete_topics([log.topic])[log.topic].result(30)

    def recreated() -> bool:
        try:
            new_topic(1, name=log.topic, config=COMPACTED)
        except KafkaException:
            return False  # still being deleted
        return True

    wait_for("the changelog to be created again", recreated, 60, every=0.5)
    log.append([(_key(i), b"new") for i in range(100, 180)])
    assert log.end() > end and log.topic_id() != old_id

    worker = log.worker(tmp_path, "w", root).start()
    worker.wait_ready(120)
    assert worker.stop() == 0
    refused = _messages(worker, "snapshot refused")
    assert len(refused) == 1, [line.get("msg") for line in worker.logs()]
    reason = str(refused[0]["reason"])
    assert f"topic id {old_id}" in reason and "deleted and recreated" in reason, reason
    assert not _messages(worker, "store loaded from snapshot")
    content, _checkpoint = _store(tmp_path, "w", log.app)
    assert content == log.content() == {_key(i): b"new" for i in range(100, 180)}
