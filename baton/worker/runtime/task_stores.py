"""Which stores a task has, where they live on disk, and what restores them.

A task's stores follow from its sub-topology: its own stores (restored from their
changelogs) and its tables' stores (tailed from the tables' source topics for good). The
active task, its standby and a dormant folder all use ``state_dir/<app>/<task>/<store>``,
so a standby promoted here hands over open stores and a folder left by an earlier owner
restores only the changelog after its checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from baton.worker.config import StoreKind
from baton.worker.naming import TaskId, changelog_topic
from baton.worker.state import statedir
from baton.worker.state.restore import RestoreJob
from baton.worker.state.stores import KeyValueStore, MemoryStore, RocksDBStore
from baton.worker.topology.graph import BuiltTopology


@dataclass
class TaskStores:
    app: str
    app_dir: Path
    kind: StoreKind
    topology: BuiltTopology
    # offset sums of task folders no task uses here, read once (opening RocksDB is not free)
    _dormant: dict[TaskId, int] = field(default_factory=dict)

    def open_store(self, task_id: TaskId, name: str) -> KeyValueStore:
        if self.kind is StoreKind.MEMORY:
            return MemoryStore()
        return RocksDBStore(self.app_dir / str(task_id) / name)

    def open(self, task_id: TaskId) -> dict[str, KeyValueStore]:
        sub = self.topology.subtopologies[task_id.subtopology]
        names = [s.name for s in sub.stores] + [t.store.name for t in sub.tables]
        return {name: self.open_store(task_id, name) for name in names}

    def restore_jobs(self, task_id: TaskId, stores: dict[str, KeyValueStore]) -> list[RestoreJob]:
        """One job per store: changelogs to their end, tables' source topics tailed for good."""
        sub = self.topology.subtopologies[task_id.subtopology]
        jobs = [
            RestoreJob(task_id, s.name, changelog_topic(self.app, s.name), task_id.partition, stores[s.name])
            for s in sub.stores
        ]
        jobs += [
            RestoreJob(
                task_id,
                t.store.name,
                t.store.source_topic or "",
                task_id.partition,
                stores[t.store.name],
                tail=True,
            )
            for t in sub.tables
        ]
        return jobs

    def state_partitions(self, task: TaskId) -> list[tuple[str, int]]:
        """The partitions a task's stores restore from: what its offset sums are sums of."""
        sub = self.topology.subtopologies[task.subtopology]
        return [(changelog_topic(self.app, s.name), task.partition) for s in sub.stores] + [
            (t.store.source_topic or "", task.partition) for t in sub.tables
        ]

    def offset_sums(self, open_stores: dict[TaskId, dict[str, KeyValueStore]]) -> dict[TaskId, int]:
        """Offset sums of every task with local state here (Kafka Streams' task offset sums).

        Open stores are read as they are; a folder no task uses is opened once and its sum
        kept until a task uses it again. Runs on the processing thread, which owns the stores.
        """
        out = {t: sum(s.checkpoint() or 0 for s in stores.values()) for t, stores in open_stores.items()}
        for task in list(self._dormant):
            if task in open_stores:
                del self._dormant[task]
        if self.kind is StoreKind.MEMORY:
            return out
        on_disk = statedir.task_dirs(self.app_dir)
        for task in list(self._dormant):
            if task not in on_disk:
                del self._dormant[task]
        for task in sorted(on_disk - set(open_stores)):
            if task.subtopology >= len(self.topology.subtopologies):
                continue  # a folder of another topology version
            if task not in self._dormant:
                stores = self.open(task)
                try:
                    self._dormant[task] = sum(s.checkpoint() or 0 for s in stores.values())
                finally:
                    for store in stores.values():
                        store.close()
            out[task] = self._dormant[task]
        return out
