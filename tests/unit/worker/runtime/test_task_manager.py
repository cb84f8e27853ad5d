"""The task manager's lifecycle rules, with a fake consumer, a fake restorer and memory stores.

Each collaborator records its calls in one shared list, so the tests read the order of
what the manager did: a commit before the close of a revoked task, an abort and no commit
for a lost one, a restoring task's partitions handed over only when it is ready.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import orjson
import pytest
from confluent_kafka import OFFSET_BEGINNING, OFFSET_INVALID, TopicPartition

from baton import JSON, STR, Topology, within
from baton.worker.assignment.wire import Roles
from baton.worker.config import StoreKind
from baton.worker.naming import TaskId, source_topics
from baton.worker.runtime.metrics import CopyLag, Metrics
from baton.worker.runtime.task import Task
from baton.worker.runtime.task_manager import TaskManager
from baton.worker.runtime.task_stores import TaskStores
from baton.worker.state.restore import TaskRestore
from baton.worker.state.stores import KeyValueStore, MemoryStore
from baton.worker.topology.context import OpenGate
from tests.support.tasks import Dead, Msg, Sent

pytestmark = pytest.mark.unit

TP = tuple[str, int]
C0, C1 = ("clicks", 0), ("clicks", 1)


def _counter() -> Topology:
    t = Topology()
    t.stream("clicks", key=STR, value=JSON).group_by_key().count(store="counts").to_stream().to("out")
    return t


def _join() -> Topology:
    """Two co-partitioned inputs, one task per partition."""
    t = Topology()
    clicks = t.stream("clicks", key=STR, value=JSON)
    views = t.stream("views", key=STR, value=JSON)
    clicks.join(views, lambda c, v: [c, v], windows=within(10)).to("out", key=STR, value=JSON)
    return t


def _tps(partitions: list[TopicPartition]) -> list[tuple[str, int, int]]:
    return [(p.topic, p.partition, p.offset) for p in partitions]


@dataclass
class FakeConsumer:
    """The calls the task manager makes on librdkafka, recorded; committed offsets as set."""

    events: list[object]
    offsets: dict[TP, int] = field(default_factory=dict)
    assigned: set[TP] = field(default_factory=set)

    def committed(self, partitions: list[TopicPartition], timeout: float = -1) -> list[TopicPartition]:
        return [
            TopicPartition(p.topic, p.partition, self.offsets.get((p.topic, p.partition), OFFSET_INVALID))
            for p in partitions
        ]

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in sorted(self.assigned)]

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("assign", _tps(partitions)))
        self.assigned.update((p.topic, p.partition) for p in partitions)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("unassign", [(p.topic, p.partition) for p in partitions]))
        self.assigned.difference_update((p.topic, p.partition) for p in partitions)

    def seek(self, partition: TopicPartition) -> None:
        self.events.append(("seek", partition.topic, partition.partition, partition.offset))

    def pause(self, partitions: list[TopicPartition]) -> None:
        self.events.append(("pause", [(p.topic, p.partition) for p in partitions]))


@dataclass
class FakeRestorer:
    """Keeps the restores handed to it; ``finish`` plays the restore thread saying one is ready."""

    events: list[object]
    restores: dict[TaskId, TaskRestore] = field(default_factory=dict)

    def add(self, restore: TaskRestore) -> None:
        self.restores[restore.task] = restore

    def remove(self, task: TaskId, timeout: float = 30.0) -> None:
        self.events.append(("restore removed", task))

    def finish(self, task: TaskId) -> None:
        restore = self.restores[task]
        restore.on_ready(restore)


@dataclass
class FakeStandbys:
    events: list[object]
    warm: dict[TaskId, dict[str, KeyValueStore]] = field(default_factory=dict)

    @property
    def hosted(self) -> Mapping[TaskId, object]:
        return self.warm

    def promote(self, task: TaskId) -> dict[str, KeyValueStore] | None:
        return self.warm.pop(task, None)

    def active_closed(self, task: TaskId) -> None:
        self.events.append(("closed", task))


@dataclass
class Setup:
    manager: TaskManager
    consumer: FakeConsumer
    restorer: FakeRestorer
    standbys: FakeStandbys
    metrics: Metrics
    events: list[object]


def _setup(tmp_path: Path, topology: Topology | None = None) -> Setup:
    built = (topology or _counter()).build()
    events: list[object] = []
    consumer, restorer, standbys = FakeConsumer(events), FakeRestorer(events), FakeStandbys(events)
    metrics = Metrics("app")
    stores = TaskStores("app", tmp_path, StoreKind.MEMORY, built)

    def build(task_id: TaskId, task_stores: dict[str, KeyValueStore]) -> Task:
        return Task(
            task_id,
            built.subtopologies[task_id.subtopology],
            application_id="app",
            stores=task_stores,
            send=Sent(),
            gate=OpenGate(),
            caching=True,
            dead_letter=Dead(),
        )

    manager = TaskManager(
        consumer=consumer,
        topic_to_sub=source_topics(built, "app"),
        build=build,
        open_stores=stores.open,
        jobs_for=stores.restore_jobs,
        restorer=restorer,
        standbys=standbys,
        commit=lambda: events.append("commit"),
        abort=lambda: events.append("abort"),
        metrics=metrics,
        copy_lag=CopyLag(metrics, Roles),
    )
    return Setup(manager, consumer, restorer, standbys, metrics, events)


def _active(s: Setup, *tps: TP) -> None:
    """Assign ``tps`` and let every new task finish its restore."""
    before = set(s.manager.tasks)
    s.manager.assign(list(tps))
    for task in set(s.manager.tasks) - before:
        s.restorer.finish(task)
    s.manager.activate_ready()


def _click(offset: int, user: str) -> Msg:
    return Msg("clicks", offset, user.encode(), orjson.dumps({"user_id": user}))


def _metric(s: Setup, name: str, labels: dict[str, str] | None = None) -> float:
    value = s.metrics.registry.get_sample_value(name, labels or {})
    return value or 0.0


def test_an_assigned_task_restores_first_and_reaches_librdkafka_at_its_committed_offset(
    tmp_path: Path,
) -> None:
    s = _setup(tmp_path)
    s.consumer.offsets[C0] = 5  # C1 has no commit yet: it starts at the beginning
    s.manager.expect([C0, C1])
    s.manager.assign([C0, C1])
    assert s.manager.restoring() == {TaskId(0, 0), TaskId(0, 1)}
    assert s.manager.active == {} and s.manager.running() == []
    assert s.events == []  # nothing handed to librdkafka while restoring
    assert not s.manager.applied()

    s.restorer.finish(TaskId(0, 0))
    s.manager.activate_ready()
    assert s.events == [("assign", [("clicks", 0, 5)])]
    assert s.manager.active[C0] is s.manager.tasks[TaskId(0, 0)]
    assert s.manager.running() == [s.manager.tasks[TaskId(0, 0)]]
    assert not s.manager.applied()  # C1 still restores

    s.restorer.finish(TaskId(0, 1))
    s.manager.activate_ready()
    assert s.events[-1] == ("assign", [("clicks", 1, OFFSET_BEGINNING)])
    assert s.manager.restoring() == frozenset()
    assert s.manager.applied()
    assert _metric(s, "baton_restores_completed_total", {"task": "0_1"}) == 1
    assert _metric(s, "baton_task_starts_total", {"kind": "restored"}) == 2


def test_readiness_waits_for_every_owned_partition(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.manager.expect([C0, C1])  # the assignment says both; Assigned brings one first
    _active(s, C0)
    assert not s.manager.applied()
    _active(s, C1)
    assert s.manager.applied()
    s.manager.expect([C0])  # a later assignment without C1: ready with C1 still here
    assert s.manager.applied()


def test_a_revoked_task_is_committed_then_closed(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    _active(s, C0, C1)
    s.events.clear()
    task = s.manager.tasks[TaskId(0, 0)]
    s.manager.revoke([C0])
    assert s.events == [
        "commit",
        ("restore removed", TaskId(0, 0)),
        ("closed", TaskId(0, 0)),
        ("unassign", [C0]),
    ]
    assert set(s.manager.tasks) == {TaskId(0, 1)}
    assert C0 not in s.manager.active and s.manager.active[C1] is s.manager.tasks[TaskId(0, 1)]
    assert task not in s.manager.running()


def test_lost_partitions_abort_rewind_the_rest_and_never_commit(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.consumer.offsets[C0] = 10
    s.consumer.offsets[C1] = 20
    _active(s, C0, C1)
    kept = s.manager.tasks[TaskId(0, 0)]
    kept.process_run([_click(10, "a"), _click(11, "b")])
    assert kept.positions["clicks"] == 12
    s.events.clear()

    s.manager.expect([C0, C1])
    s.manager.lose([C1])
    assert s.events == [
        "abort",
        ("seek", "clicks", 0, 10),  # the kept task's uncommitted work went with the abort
        ("seek", "clicks", 1, 20),  # the lost one's is dropped too, before it closes
        ("restore removed", TaskId(0, 1)),
        ("closed", TaskId(0, 1)),
        ("unassign", [C1]),
    ]
    assert "commit" not in s.events
    assert kept.positions["clicks"] == 10 and kept.processed_since_commit == 0
    assert set(s.manager.tasks) == {TaskId(0, 0)}
    assert s.manager.applied()  # the lost partition is not expected any more


def test_a_task_revoked_while_restoring_never_becomes_active(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.manager.assign([C0])
    restore = s.restorer.restores[TaskId(0, 0)]
    s.manager.revoke([C0])
    assert s.manager.tasks == {} and s.manager.restoring() == frozenset()
    assert ("restore removed", TaskId(0, 0)) in s.events
    assert not any(e[0] in {"assign", "unassign"} for e in s.events if isinstance(e, tuple))

    restore.on_ready(restore)  # the restore thread finished just before it was removed
    s.manager.activate_ready()
    assert s.manager.active == {}
    assert not any(e[0] == "assign" for e in s.events if isinstance(e, tuple))

    s.manager.assign([C0])  # assigned again: a new task, whose own restore counts
    s.restorer.finish(TaskId(0, 0))
    restore.on_ready(restore)  # a stale one again, after the new one
    s.manager.activate_ready()
    assert [e for e in s.events if isinstance(e, tuple) and e[0] == "assign"] == [
        ("assign", [("clicks", 0, OFFSET_BEGINNING)])
    ]


def test_a_partition_held_for_a_flip_is_paused_when_its_task_becomes_active(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.manager.held.add(C1)  # the flip's cut was reached before this worker had the task
    _active(s, C0, C1)
    assigned = [e for e in s.events if isinstance(e, tuple) and e[0] == "assign"]
    assert sorted(p for e in assigned for p in e[1]) == [
        ("clicks", 0, OFFSET_BEGINNING),
        ("clicks", 1, OFFSET_BEGINNING),
    ]
    assert [e for e in s.events if isinstance(e, tuple) and e[0] == "pause"] == [("pause", [C1])]


def test_a_co_partitioned_topic_assigned_later_joins_the_active_task_at_once(tmp_path: Path) -> None:
    s = _setup(tmp_path, _join())
    views = ("views", 0)
    _active(s, C0)
    task = s.manager.tasks[TaskId(0, 0)]
    s.consumer.offsets[views] = 7
    s.manager.assign([views])
    assert s.manager.active[views] is task and s.manager.restoring() == frozenset()
    assert s.events[-1] == ("assign", [("views", 0, 7)])

    s.events.clear()
    s.manager.revoke([C0, views])  # co-partitioned partitions travel together
    assert s.manager.tasks == {} and s.manager.active == {}
    assert s.events == [
        "commit",
        ("restore removed", TaskId(0, 0)),
        ("closed", TaskId(0, 0)),
        ("unassign", [C0, views]),
    ]


def test_a_promoted_standby_hands_over_its_stores(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    warm = MemoryStore()
    warm.write([(b"a", b"3")], checkpoint=42)
    s.standbys.warm[TaskId(0, 0)] = {"counts": warm}
    s.manager.assign([C0])
    assert s.manager.tasks[TaskId(0, 0)].persistent["counts"] is warm
    assert s.manager.local_stores() == {TaskId(0, 0): {"counts": warm}}
    assert _metric(s, "baton_task_starts_total", {"kind": "promoted"}) == 1


def test_the_first_record_ends_the_start_of_a_partition(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    s.manager.assign([C0])
    assert C0 in s.manager.awaiting_first
    assert not s.manager.actives_starting()  # still restoring: no active awaits a record
    s.restorer.finish(TaskId(0, 0))
    s.manager.activate_ready()
    assert s.manager.actives_starting()  # standbys hold back for it
    s.manager.first_records({C0: 3})
    assert not s.manager.actives_starting() and s.manager.awaiting_first == {}
    assert _metric(s, "baton_assignment_to_first_record_seconds_count") == 1


def test_close_all_closes_restoring_and_active_tasks(tmp_path: Path) -> None:
    s = _setup(tmp_path)
    _active(s, C0)
    s.manager.assign([C1])
    s.manager.close_all()
    assert s.manager.tasks == {} and s.manager.active == {} and s.manager.restoring() == frozenset()
    assert sorted(e[1] for e in s.events if isinstance(e, tuple) and e[0] == "closed") == [
        TaskId(0, 0),
        TaskId(0, 1),
    ]
