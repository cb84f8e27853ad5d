"""Restoring stores from changelogs, off the processing loop, with one manually assigned consumer.

A restore job brings one store from its checkpoint to the end of its changelog
partition, reading with ``read_committed`` so that records of aborted transactions are
never applied. Each fetched batch is written to the store together with the offset it
reaches, so an interrupted restore resumes where it stopped. The end is the
partition-EOF event, which under ``read_committed`` fires at the last stable offset: no
open transaction of another (possibly zombie) producer can make the restore wait or
apply uncommitted data.

Jobs marked ``tail`` keep reading after the end: that is how tables read from a topic
stay current, and how standby tasks follow their changelogs (same consumer, same loop, a
job that never completes). A standby store is written only here, with the same batch +
checkpoint as a restore, so promoting it to active replays only the changelog after its
checkpoint; a standby never produces anything. Standby jobs report their lag (changelog
end minus checkpoint) about once a second.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Message, TopicPartition

from baton.worker.naming import TaskId
from baton.worker.state.stores import KeyValueStore

log = logging.getLogger(__name__)
# How long the thread waits for records (or, idle, for work) before it looks at its requests
# again. The main thread waits for that when it promotes a standby (remove()), once per task
# moving here, while the partition pauses: 0.1 s cost a scale-out 0.1 s per task.
POLL_SECONDS = 0.02

# Loads a snapshot into the (empty) store of a job and returns the changelog offset it covers,
# or None; called with the changelog's (low, high). See ``snapshot.seeder``.
Seed = Callable[["RestoreJob", int, int], int | None]


@dataclass(eq=False)
class RestoreJob:
    task: TaskId
    store_name: str
    topic: str
    partition: int
    store: KeyValueStore
    tail: bool = False
    standby: bool = False  # mirrors another member's active task; never becomes active from here
    restored: int = 0
    start: int = 0
    end: int = 0
    done: bool = False
    position: int = -1  # next changelog offset the store reflects, once started


@dataclass(eq=False)
class TaskRestore:
    """All jobs of one task; ``on_ready`` runs (in the restore thread) when all have reached the end."""

    task: TaskId
    jobs: list[RestoreJob]
    on_ready: Callable[[TaskRestore], None]
    standby: bool = False
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None

    @property
    def restored(self) -> int:
        return sum(j.restored for j in self.jobs)


class Restorer(threading.Thread):
    """The restore thread. The main thread adds and removes tasks; stores are written only here until ready."""

    def __init__(
        self,
        consumer_config: dict[str, object],
        on_progress: Callable[[RestoreJob, int], None] = lambda _job, _n: None,
        seed: Seed | None = None,
        on_lag: Callable[[RestoreJob, int], None] = lambda _job, _lag: None,
        actives_starting: Callable[[], bool] = lambda: False,
    ) -> None:
        super().__init__(name="baton-restore", daemon=True)
        config = dict(consumer_config)
        config.update(
            {
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "auto.offset.reset": "earliest",
            }
        )
        # prefetch deep: restore speed is bound by how fast records arrive, not by RocksDB; the total
        config.setdefault("queued.min.messages", 500000)  # capped by queued.max.messages.kbytes
        # a restore is done at the partition EOF, which a fetch at the end reports only after the
        # broker's wait: 500 ms by default, added to every promotion and every small restore
        config.setdefault("fetch.wait.max.ms", 50)
        self._consumer = Consumer(config)
        self._requests: queue.Queue[tuple[str, object, threading.Event]] = queue.Queue()
        self._jobs: dict[tuple[str, int], RestoreJob] = {}
        self._tasks: dict[TaskId, TaskRestore] = {}
        self._on_progress = on_progress
        self._seed = seed
        self._on_lag = on_lag
        self._actives_starting = actives_starting  # active tasks here that have not processed a record yet
        self._next_lag = 0.0
        self._paused: set[tuple[str, int]] = set()  # standby partitions held back for active restores
        self._stopping = threading.Event()
        self.error: BaseException | None = None

    # -- called from the main thread -------------------------------------------------------
    def add(self, restore: TaskRestore) -> None:
        self._requests.put(("add", restore, threading.Event()))

    def remove(self, task: TaskId, timeout: float = 30.0) -> None:
        """Stop restoring/tailing ``task``; returns once the thread no longer touches its stores."""
        done = threading.Event()
        self._requests.put(("remove", task, done))
        if self.is_alive():
            done.wait(timeout)

    def stop(self) -> None:
        self._stopping.set()

    # -- the thread ------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while not self._stopping.is_set():
                self._handle_requests()
                if not self._jobs:
                    time.sleep(POLL_SECONDS)
                    continue
                self._prioritize()
                self._poll()
                self._report_lag()
        except BaseException as exc:  # surfaced by the main loop, which stops the worker
            log.exception("restore thread failed")
            self.error = exc
        finally:
            self._consumer.close()

    def _handle_requests(self) -> None:
        while True:
            try:
                kind, payload, done = self._requests.get_nowait()
            except queue.Empty:
                return
            if kind == "add":
                assert isinstance(payload, TaskRestore)
                self._start(payload)
            else:
                assert isinstance(payload, TaskId)
                self._drop(payload)
            done.set()

    def _start(self, restore: TaskRestore) -> None:
        # Jobs are found again by their task id when they finish: a job of another task would
        # never make this restore ready.
        if any(job.task != restore.task for job in restore.jobs):
            raise ValueError(f"restore of task {restore.task} holds jobs of other tasks")
        self._tasks[restore.task] = restore
        assign: list[TopicPartition] = []
        for job in restore.jobs:
            low, high = self._consumer.get_watermark_offsets(
                TopicPartition(job.topic, job.partition), timeout=30
            )
            checkpoint = job.store.checkpoint()
            if checkpoint is not None and (checkpoint > high or checkpoint < low):
                # the changelog was recreated or truncated under us: the local copy cannot be trusted
                log.warning(
                    "store checkpoint outside the changelog; wiping",
                    extra={
                        "task": str(job.task),
                        "store": job.store_name,
                        "checkpoint": checkpoint,
                        "low": low,
                        "high": high,
                    },
                )
                job.store.wipe()
                checkpoint = None
            if checkpoint is None and _holds_data(job.store):
                # a snapshot load that crashed before its last batch: keys without a checkpoint. Loaded
                # or replayed over, one deleted since (its tombstone compacted away) would stay
                log.warning(
                    "store holds data but no checkpoint; wiping",
                    extra={"task": str(job.task), "store": job.store_name, "partition": job.partition},
                )
                job.store.wipe()
            if checkpoint is None and self._seed is not None:  # from scratch: start from a snapshot if any
                checkpoint = self._seed(job, low, high)
            job.start = low if checkpoint is None else checkpoint
            job.position = job.start
            job.end = high
            if job.start >= high and not job.tail:
                job.done = True
                continue
            if job.start >= high:
                job.done = True
            self._jobs[(job.topic, job.partition)] = job
            assign.append(
                TopicPartition(
                    job.topic, job.partition, job.start if checkpoint is not None else OFFSET_BEGINNING
                )
            )
        if assign:
            self._consumer.incremental_assign(assign)
        self._check_ready(restore)

    def _drop(self, task: TaskId) -> None:
        self._tasks.pop(task, None)
        gone = [key for key, job in self._jobs.items() if job.task == task]
        for key in gone:
            del self._jobs[key]
        if gone:
            # librdkafka keeps a partition paused across unassign and assign: a standby paused
            # by _prioritize and promoted here would restore as an active that never fetches
            # (found by bench/scaleout.py: the task stayed "restoring" for good)
            paused = [TopicPartition(t, p) for t, p in gone if (t, p) in self._paused]
            if paused:
                self._consumer.resume(paused)
            self._paused -= set(gone)
            self._consumer.incremental_unassign([TopicPartition(t, p) for t, p in gone])

    def _poll(self) -> None:
        """Apply one fetched batch. Written for speed: a restore is bounded by this loop in Python.

        Fetched records come in runs of one partition, so the partition is resolved once per
        run, and the offset reached is taken from the run's last record.
        """
        messages = self._consumer.consume(num_messages=10000, timeout=POLL_SECONDS)
        batches: dict[tuple[str, int], list[tuple[bytes, bytes | None]]] = {}
        reached: dict[tuple[str, int], int] = {}
        eof: set[tuple[str, int]] = set()
        jobs = self._jobs
        tp: tuple[str, int] = ("", -1)
        run: list[tuple[bytes, bytes | None]] | None = None  # records of the current run, None: not ours
        last: Message | None = None  # last record of the current run

        def close_run() -> None:
            if last is not None:
                reached[tp] = int(last.offset() or 0) + 1

        for msg in messages:
            partition, topic = msg.partition(), msg.topic()
            if partition != tp[1] or topic != tp[0]:
                close_run()
                assert topic is not None and partition is not None
                tp, last = (topic, partition), None
                run = batches.setdefault(tp, []) if tp in jobs else None
            if run is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    raise RuntimeError(f"restore of {tp} failed: {err}")
                close_run()
                last = None
                eof.add(tp)
                reached[tp] = max(reached.get(tp, 0), int(msg.offset() or 0))
                continue
            key = msg.key()
            if key is not None:
                run.append((key, msg.value()))
            last = msg
        close_run()
        for tp, offset in reached.items():
            job = self._jobs[tp]
            items = batches.get(tp, [])
            job.store.write(items, offset)
            job.position = offset
            job.restored += len(items) if not job.done else 0
            if items:
                self._on_progress(job, len(items))
        for tp in eof:
            job = self._jobs[tp]
            if job.done:
                continue
            job.done = True
            restore = self._tasks.get(job.task)
            if not job.tail:
                del self._jobs[tp]
                self._consumer.incremental_unassign([TopicPartition(*tp)])
            if restore is not None:
                self._check_ready(restore)

    def _check_ready(self, restore: TaskRestore) -> None:
        if all(job.done for job in restore.jobs) and self._tasks.get(restore.task) is restore:
            restore.finished = time.monotonic()
            seconds = round(restore.finished - restore.started, 3)
            for job in restore.jobs:
                log.info(
                    "standby caught up" if restore.standby else "store restored",
                    extra={
                        "task": str(job.task),
                        "store": job.store_name,
                        "restored": job.restored,
                        "from_offset": job.start,
                        "to_offset": job.end,
                        "seconds": seconds,
                    },
                )
            restore.on_ready(restore)
            self._tasks.pop(restore.task, None)

    def _prioritize(self) -> None:
        """Active restores first: standby partitions are paused while any active task is restoring.

        They share one consumer, and after a failover the rule re-places standbys at the same
        moment the orphaned tasks restore; unchecked, standbys catching up from scratch took
        two thirds of the restore throughput exactly when the active tasks needed it.
        The same holds from a task's activation to its first processed record: a standby
        applying a large batch holds the GIL, and the first record of a task that had just
        moved here waited half a second behind it (bench/scaleout.py).
        """
        busy = (
            any(not job.done and not job.standby for job in self._jobs.values()) or self._actives_starting()
        )
        standby = {tp for tp, job in self._jobs.items() if job.standby}
        self._paused &= standby  # removed jobs were resumed by _drop
        want = standby if busy else set()
        if want - self._paused:
            self._consumer.pause([TopicPartition(t, p) for t, p in want - self._paused])
        if self._paused - want:
            self._consumer.resume([TopicPartition(t, p) for t, p in self._paused - want])
        self._paused = want

    def _report_lag(self) -> None:
        """Standby lag per store: the changelog end minus the consumer's position, about once a second.

        The position, not the store's checkpoint: librdkafka moves the position past
        transaction markers, which are not records, and under steady exactly-once traffic a
        ``read_committed`` reader never sees a partition EOF (that compares with the high
        watermark), so the checkpoint alone would stay one marker behind forever. What
        remains above the position is the active task's open transaction: a lag of a few
        records is "caught up".
        """
        now = time.monotonic()
        if now < self._next_lag:
            return
        self._next_lag = now + 1.0
        standby = [job for job in self._jobs.values() if job.standby and job.position >= 0]
        if not standby:
            return
        positions = self._consumer.position([TopicPartition(job.topic, job.partition) for job in standby])
        for job, tp in zip(standby, positions, strict=True):
            _low, high = self._consumer.get_watermark_offsets(
                TopicPartition(job.topic, job.partition), cached=True
            )
            if high is not None and high >= 0:
                self._on_lag(job, max(0, high - max(job.position, tp.offset)))


def _holds_data(store: KeyValueStore) -> bool:
    return next(iter(store.items()), None) is not None
