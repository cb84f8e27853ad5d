"""Global tables: every worker process holds each one whole, beside its tasks.

A global table is no task's: it has no changelog of its own (its topic is one), no
standby and no assignment. At start the worker reads every partition of its topic into
one local store through the restore thread (tail jobs that never complete, like a tailed
table's), waits until all have reached their end, and only then joins the group, as Kafka
Streams bootstraps global stores before its stream threads run. Lookups read the store the
restore thread keeps writing; a stream record thus meets the table as it stands when the
record is processed (not a version of its own time).

The store is emptied at every start and read from the beginning: one store holds all
partitions, which would need a checkpoint per partition to resume, and global tables are
meant for reference data small enough to reload.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from baton.worker.config import StoreKind
from baton.worker.naming import TaskId
from baton.worker.state.restore import RestoreJob, Restorer, TaskRestore
from baton.worker.state.stores import KeyValueStore, MemoryStore, RocksDBStore
from baton.worker.topology.graph import GlobalTableNode

GLOBAL_DIR = "global"  # under the app's state dir; not a task folder (those are named like 0_3)


class _PartitionView(KeyValueStore):
    """One partition's restore job writing into the shared store, with its own position.

    Positions are kept in memory only: the store is rebuilt at every start."""

    def __init__(self, shared: KeyValueStore) -> None:
        self._shared = shared
        self._position: int | None = None

    def get(self, key: bytes) -> bytes | None:
        return self._shared.get(key)

    def write(self, items: Iterable[tuple[bytes, bytes | None]], checkpoint: int | None) -> None:
        self._shared.write(items, None)
        if checkpoint is not None:
            self._position = checkpoint

    def checkpoint(self) -> int | None:
        return self._position

    def items(self) -> Iterator[tuple[bytes, bytes]]:
        return self._shared.items()

    def close(self) -> None:
        """The shared store is closed by its owner."""

    def wipe(self) -> None:
        self._position = None


class GlobalStores:
    """The worker's global tables: their stores, loaded once at start and followed from then on."""

    def __init__(self, app_dir: Path, kind: StoreKind, tables: list[GlobalTableNode]) -> None:
        self.tables = tables
        self.stores: dict[str, KeyValueStore] = {}
        for table in tables:
            if kind is StoreKind.MEMORY:
                self.stores[table.store.name] = MemoryStore()
            else:
                path = app_dir / GLOBAL_DIR / table.store.name
                shutil.rmtree(path, ignore_errors=True)  # rebuilt from the topic at every start
                self.stores[table.store.name] = RocksDBStore(path)

    def bootstrap(
        self, restorer: Restorer, partitions: dict[str, int], stop: threading.Event, timeout: float
    ) -> None:
        """Read every global table to its end (then keep following it); raises if that takes ``timeout``."""
        ready: list[threading.Event] = []
        for index, table in enumerate(self.tables):
            topic = table.store.source_topic or ""
            task = TaskId(-1 - index, 0)  # no real task: negative sub-topologies never collide
            jobs = [
                RestoreJob(
                    task, table.store.name, topic, p, _PartitionView(self.stores[table.store.name]), tail=True
                )
                for p in range(partitions[topic])
            ]
            done = threading.Event()
            restorer.add(TaskRestore(task, jobs, _setter(done)))
            ready.append(done)
        for done in ready:
            if not _wait(done, stop, timeout):
                if restorer.error is not None:
                    raise RuntimeError("loading a global table failed") from restorer.error
                if stop.is_set():
                    return
                raise RuntimeError(f"global tables not loaded within {timeout:.0f} s")

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


def _setter(event: threading.Event) -> Callable[[TaskRestore], None]:
    return lambda _restore: event.set()


def _wait(event: threading.Event, stop: threading.Event, timeout: float) -> bool:
    waited = 0.0
    while waited < timeout and not stop.is_set():
        if event.wait(0.2):
            return True
        waited += 0.2
    return event.is_set()
