"""The active tasks of one worker and their lifecycle (Kafka Streams' TaskManager and Tasks).

A task's states::

    restoring --ready--> active --revoked (commit first) or lost (abort first)--> closed
        |                                                                          ^
        +---------------- revoked or lost (nothing of it to commit) ---------------+

A task is created when the group assigns its first partition here. It restores its stores
off the processing thread (``state/restore.py``; a standby hosted here hands over its warm
stores, so only the tail is replayed) and becomes active when the restorer says it is
ready. It is closed when every partition of it is revoked or lost, or at shutdown.

The rules this object keeps, whatever the order of events:

1. **Lost partitions**: the group gave them to another member without a clean revoke, so
   nothing processed here since the last commit may be committed by us. The uncommitted
   work is aborted (``abort``: the open transaction, or the write caches), every remaining
   task rewinds to its committed offsets (the abort dropped its work too), and the lost
   tasks are closed without a commit.
2. **Revoked partitions**: the next owner starts from our committed offsets once we
   return, so what was processed is committed first, then the tasks are closed.
3. **A restoring task's partitions reach librdkafka only when it is ready**, at their
   committed offset. Assigning them at once and pausing them was the obvious way, but
   librdkafka starts fetching a resumed partition only ~0.7 s after ``resume()`` and a newly
   assigned one within ~20 ms (measured): that 0.7 s was added to every promotion and every
   scale-out move.
4. **Partitions held for a flip are paused when activated**: a new active that reached a
   flip's cut waits there until the old active drained (``flip_pause.py`` holds and
   releases them, in ``held``).

Order on assignment matters under exactly-once: the committed input offsets are fetched
first (``read_committed`` makes librdkafka wait for *stable* offsets, i.e. until a
previous owner's pending transaction is resolved), and only then does the restore read
the changelog end. So a transaction the previous owner committed at the last moment is
both in the offsets and in the restored state, never in one only.

What the loop needs is plain data: ``active`` is the dispatch index (partition -> active
task), read once per run of records with a dict lookup; ``running()`` is the commit set.
Everything here runs on the processing thread, except ``actives_starting`` (the restore
thread) and ``applied`` (the HTTP thread's readiness), which only read.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from baton.worker.naming import TaskId, tasks_for
from baton.worker.runtime.metrics import CopyLag, Metrics
from baton.worker.runtime.task import Task
from baton.worker.state.restore import TaskRestore
from baton.worker.state.standby import JobsFor, OpenStores
from baton.worker.state.stores import KeyValueStore

log = logging.getLogger("baton.worker")

ACTIVE_START_SECONDS = 3.0  # how long standbys wait for an activated task's first record at most

TP = tuple[str, int]
# confluent's Message may say None for its topic and partition: the loop looks those up too
AnyTP = tuple[str | None, int | None]
BuildTask = Callable[[TaskId, dict[str, KeyValueStore]], Task]


class DataConsumer(Protocol):
    """What the task manager asks of the data consumer (``confluent_kafka.Consumer`` fits)."""

    def committed(self, partitions: list[TopicPartition], timeout: float = ...) -> list[TopicPartition]: ...
    def assignment(self) -> list[TopicPartition]: ...
    def incremental_assign(self, partitions: list[TopicPartition]) -> None: ...
    def incremental_unassign(self, partitions: list[TopicPartition]) -> None: ...
    def seek(self, partition: TopicPartition) -> None: ...
    def pause(self, partitions: list[TopicPartition]) -> None: ...


class RestoreQueue(Protocol):
    """The restore thread, as the task manager uses it (``state.restore.Restorer`` fits)."""

    def add(self, restore: TaskRestore) -> None: ...
    def remove(self, task: TaskId, timeout: float = ...) -> None: ...


class Standbys(Protocol):
    """The standbys hosted here, which hand their stores to a task assigned here (``StandbyTasks``)."""

    @property
    def hosted(self) -> Mapping[TaskId, object]: ...
    def promote(self, task: TaskId) -> dict[str, KeyValueStore] | None: ...
    def active_closed(self, task: TaskId) -> None: ...


class TaskManager:
    """The tasks of one worker, by state; the worker hands it the group's decisions.

    One object, so that the rules above are kept in one place: the collections it keeps
    (tasks, the dispatch index, the restores, the held and the starting partitions) change
    together, and only here.
    """

    def __init__(
        self,
        *,
        consumer: DataConsumer,
        topic_to_sub: dict[str, int],
        build: BuildTask,
        open_stores: OpenStores,
        jobs_for: JobsFor,
        restorer: RestoreQueue,
        standbys: Standbys,
        commit: Callable[[], None],
        abort: Callable[[], None],
        metrics: Metrics,
        copy_lag: CopyLag,
        on_change: Callable[[], None] = lambda: None,
    ) -> None:
        """``commit`` commits every active task and returns once it is done; ``abort`` drops
        everything not committed (``Guarantee.abort``); ``on_change`` runs when tasks change state."""
        self._consumer = consumer
        self._topic_to_sub = topic_to_sub
        self._build = build
        self._open_stores = open_stores
        self._jobs_for = jobs_for
        self._restorer = restorer
        self._standbys = standbys
        self._commit = commit
        self._abort = abort
        self._metrics = metrics
        self._copy_lag = copy_lag
        self._on_change = on_change
        self.tasks: dict[TaskId, Task] = {}  # every task here, restoring or active
        self.active: dict[AnyTP, Task] = {}  # partition -> its active task: the loop's dispatch index
        self.held: set[TP] = set()  # held for a flip at its cut (flip_pause.py adds and releases)
        self.owned: set[TP] = set()  # the latest assignment's partitions: ready once all are active
        # partition -> when it was assigned, until its first record (what a failover costs it)
        self.awaiting_first: dict[TP, float] = {}
        self._starting: dict[TP, float] = {}  # partition -> when its task became active, until a record
        self._restores: dict[TaskId, TaskRestore] = {}  # the restoring tasks
        self._ready: queue.Queue[TaskRestore] = queue.Queue()  # filled by the restore thread

    # -- what the loop reads -------------------------------------------------------------------
    def running(self) -> list[Task]:
        """The active tasks: the ones that process records, commit, rewind and punctuate."""
        restores = self._restores
        return [t for t in self.tasks.values() if t.id not in restores]

    def restoring(self) -> frozenset[TaskId]:
        return frozenset(self._restores)

    def applied(self) -> bool:
        """Every partition of the latest assignment belongs to an active task here, none restores."""
        return self.owned <= set(self.active) and not self._restores

    def local_stores(self) -> dict[TaskId, dict[str, KeyValueStore]]:
        """The open stores of every task here, restoring or active (for the offset sums)."""
        return {t.id: t.persistent for t in self.tasks.values()}

    # -- the group's decisions -------------------------------------------------------------------
    def expect(self, owned: Iterable[TP]) -> None:
        """The latest assignment's partitions (``applied`` holds once they are all active here)."""
        self.owned = set(owned)

    def assign(self, assigned: list[TP]) -> None:
        """Create the tasks of newly assigned partitions; a task already active takes its new ones at once.

        The committed offsets are read first, stable ones, before any restore starts (the
        order on assignment, above).
        """
        now = time.monotonic()
        for tp in assigned:
            self.awaiting_first[tp] = now
        committed = self._committed([TopicPartition(t, p) for t, p in assigned])
        offsets = {(tp.topic, tp.partition): tp.offset for tp in committed}
        metadata = {(tp.topic, tp.partition): tp.metadata for tp in committed}
        fetch_now: list[TopicPartition] = []
        for task_id, tps in tasks_for(list(offsets), self._topic_to_sub).items():
            task = self.tasks.get(task_id)
            if task is None:
                task = self._new_task(task_id)
            for tp in tps:
                task.resume_stream_time(metadata.get(tp))
                start = offsets[tp] if offsets[tp] >= 0 else OFFSET_BEGINNING
                task.committed[tp[0]] = start
                task.positions[tp[0]] = start
                if task_id not in self._restores:  # already active: a co-partitioned topic joined later
                    self.active[tp] = task
                    fetch_now.append(TopicPartition(tp[0], tp[1], start))
        if fetch_now:  # a restoring task's partitions wait for activate_ready (rule 3)
            self._consumer.incremental_assign(fetch_now)
        log.info(
            "partitions assigned",
            extra={"partitions": sorted(offsets), "tasks": sorted(map(str, self.tasks))},
        )
        self._on_change()

    def revoke(self, partitions: list[TP], *, commit: bool = True) -> None:
        """Commit, then close the revoked tasks: the next owner starts from what we committed.

        ``commit=False`` only for a worker that already failed: its shutdown aborts instead.
        """
        if commit:
            self._commit()
        self._drop(partitions)

    def lose(self, partitions: list[TP]) -> None:
        """Partitions lost without a clean revoke: nothing processed since the last commit is ours to commit."""
        self.owned -= set(partitions)
        self._abort()
        self.rewind(self.running())
        self._drop(partitions)

    def close_all(self) -> None:
        """Shutdown: close every task (its caller committed or aborted first)."""
        for task in list(self.tasks.values()):
            self._close(task)

    # -- restores ----------------------------------------------------------------------------------
    def activate_ready(self) -> None:
        """Make the tasks whose restore finished active: their partitions go to librdkafka now."""
        while True:
            try:
                restore = self._ready.get_nowait()
            except queue.Empty:
                return
            if self._restores.get(restore.task) is not restore:
                continue  # revoked while restoring
            del self._restores[restore.task]
            task = self.tasks[restore.task]
            tps = [(topic, task.partition) for topic in task.committed]
            now = time.monotonic()
            for tp in tps:
                self.active[tp] = task
                self._starting[tp] = now
            self._consumer.incremental_assign([TopicPartition(t, p, task.positions[t]) for t, p in tps])
            held = [TopicPartition(t, p) for t, p in tps if (t, p) in self.held]
            if held:
                self._consumer.pause(held)
            self._metrics.restores_completed.labels(str(task.id)).inc()
            for job in restore.jobs:
                self._metrics.restore_remaining.labels(str(task.id), job.store_name).set(0)
            seconds = (restore.finished or time.monotonic()) - restore.started
            self._metrics.restore_seconds.labels(str(task.id)).inc(seconds)
            log.info(
                "task active",
                extra={
                    "task": str(task.id),
                    "partition": task.partition,
                    "restored": restore.restored,
                    "restore_seconds": round(seconds, 3),
                },
            )
            self._on_change()

    # -- commits -----------------------------------------------------------------------------------
    def rewind(self, tasks: Iterable[Task]) -> None:
        """Uncommitted work was dropped: re-read every input from its last committed offset."""
        for task in tasks:
            for topic, offset in task.rewind().items():
                try:
                    self._consumer.seek(TopicPartition(topic, task.partition, offset))
                except KafkaException as exc:  # not assigned any more: the new owner takes over
                    log.info("seek skipped", extra={"task": str(task.id), "error": str(exc)})

    # -- first records -------------------------------------------------------------------------------
    def first_records(self, counts: Mapping[AnyTP, int]) -> None:
        """Time from assignment to the first processed record: what a failover costs a partition."""
        now = time.monotonic()
        for tp in counts:
            self._starting.pop(tp, None)  # type: ignore[arg-type]
            assigned = self.awaiting_first.pop(tp, None)  # type: ignore[arg-type]
            if assigned is None:
                continue
            seconds = now - assigned
            self._metrics.first_record.observe(seconds)
            log.info(
                "first record processed",
                extra={"topic": tp[0], "partition": tp[1], "seconds_since_assignment": round(seconds, 3)},
            )

    def actives_starting(self) -> bool:
        """Restore thread: a partition activated in the last few seconds still awaits its first record.

        Bounded in time: a partition with no input never sees a first record, and standbys
        must not wait for it for ever.
        """
        now = time.monotonic()
        return any(now - since < ACTIVE_START_SECONDS for since in list(self._starting.values()))

    # -- internals -----------------------------------------------------------------------------------
    def _committed(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Committed offsets, waiting while a previous owner's transaction is pending (stable offsets)."""
        for attempt in range(20):
            try:
                return self._consumer.committed(partitions, timeout=15)
            except KafkaException as exc:
                log.info(
                    "waiting for stable committed offsets", extra={"attempt": attempt, "error": str(exc)}
                )
        raise RuntimeError("could not read committed offsets")

    def _new_task(self, task_id: TaskId) -> Task:
        promoted = self._standbys.promote(task_id)  # a standby hands over its warm, open stores
        if promoted is not None:
            self._copy_lag.prune(self._standbys.hosted)
        stores = promoted if promoted is not None else self._open_stores(task_id)
        warm = any(store.checkpoint() is not None for store in stores.values())
        if promoted is not None and warm:
            kind = "promoted"
        elif warm:
            kind = "resumed"  # a folder left here earlier: only the changelog after its checkpoint
        else:
            kind = "restored"  # from scratch (a standby placed a moment ago holds nothing yet either)
        self._metrics.task_starts.labels(kind).inc()
        log.info(
            "active task started", extra={"task": str(task_id), "partition": task_id.partition, "kind": kind}
        )
        task = self._build(task_id, stores)
        self.tasks[task_id] = task
        jobs = self._jobs_for(task_id, stores)
        for job in jobs:  # from 0: a stuck restore's alert reads its rate, restored nothing yet
            self._metrics.restored.labels(str(task_id), job.store_name)
        restore = TaskRestore(task_id, jobs, self._ready.put)
        self._restores[task_id] = restore
        self._restorer.add(restore)
        log.info(
            "task created, restoring",
            extra={
                "task": str(task_id),
                "partition": task_id.partition,
                "from_standby": promoted is not None,
            },
        )
        return task

    def _drop(self, revoked: list[TP]) -> None:
        """Forget revoked or lost partitions; close the tasks left with none."""
        consumer = self._consumer
        partitions = [TopicPartition(t, p) for t, p in revoked]
        gone = set(revoked)
        for tp in gone:
            self.active.pop(tp, None)
            self.awaiting_first.pop(tp, None)
            self._starting.pop(tp, None)
        for task in list(self.tasks.values()):
            if all((topic, task.partition) in gone for topic in task.committed):
                self._close(task)
        fetching = {(tp.topic, tp.partition) for tp in consumer.assignment()}
        handed = [
            tp for tp in partitions if (tp.topic, tp.partition) in fetching
        ]  # a restoring task's are not
        try:
            if handed:
                consumer.incremental_unassign(handed)
        except KafkaException as exc:
            log.info("unassign failed", extra={"error": str(exc)})
        log.info("partitions revoked", extra={"partitions": sorted(gone)})
        self._on_change()

    def _close(self, task: Task) -> None:
        self._restorer.remove(task.id)
        self._restores.pop(task.id, None)
        self.tasks.pop(task.id, None)
        for topic in task.committed:
            self.active.pop((topic, task.partition), None)
        task.close()
        with contextlib.suppress(KeyError):  # its latency series goes with it (its new owner's starts afresh)
            self._metrics.e2e_latency.remove(str(task.id))
        self._standbys.active_closed(task.id)
        log.info("task closed", extra={"task": str(task.id), "partition": task.partition})
