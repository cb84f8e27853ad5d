"""Standby tasks on this member: open their stores, let the Restorer tail them, promote, clean up.

Everything here runs on the processing thread; only the Restorer thread writes standby
stores (with their checkpoint, as a restore does), and a standby never produces: it has
no ``Task``, no processors, no access to the producer.

Lifecycle of a task folder ``state_dir/<app>/<task>``:

* **standby**: the placement rule gives this member the task; its stores are opened and
  tailed from their checkpoint (or from scratch);
* **promoted**: the group assigns the task here; tailing stops and the open stores are
  handed to the active task, whose restore starts at the standby's checkpoint: only the
  tail is replayed;
* **released**: neither active nor standby here any more (the task moved, the rule
  moved the standby, or the folder was found at start-up). The folder stays on disk for
  ``state.cleanup.delay.ms``, because tasks often come back (a restarted member gets its
  partitions back); after that it is deleted.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from baton.worker.naming import TaskId
from baton.worker.state import statedir
from baton.worker.state.restore import RestoreJob, Restorer, TaskRestore
from baton.worker.state.stores import KeyValueStore

log = logging.getLogger(__name__)

OpenStores = Callable[[TaskId], dict[str, KeyValueStore]]
JobsFor = Callable[[TaskId, dict[str, KeyValueStore]], list[RestoreJob]]


def due_for_cleanup(
    unused_since: Mapping[TaskId, float], in_use: Iterable[TaskId], now: float, delay: float
) -> list[TaskId]:
    """Folders unused for at least ``delay`` seconds and not in use now (pure)."""
    busy = set(in_use)
    return sorted(t for t, since in unused_since.items() if t not in busy and now - since >= delay)


@dataclass(eq=False)
class _Hosted:
    restore: TaskRestore
    stores: dict[str, KeyValueStore]


class StandbyTasks:
    def __init__(
        self,
        *,
        app_dir: Path,
        restorer: Restorer,
        open_stores: OpenStores,
        jobs_for: JobsFor,
        cleanup_delay: float,
        on_change: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._app_dir = app_dir
        self._restorer = restorer
        self._open_stores = open_stores
        self._jobs_for = jobs_for
        self._delay = cleanup_delay
        self._on_change = on_change
        self._clock = clock
        self.hosted: dict[TaskId, _Hosted] = {}
        # folders found at start-up are unused until a task claims them
        self._unused: dict[TaskId, float] = dict.fromkeys(statedir.task_dirs(app_dir), clock())

    def update(self, desired: set[TaskId], active: set[TaskId]) -> None:
        """Host exactly ``desired`` (minus tasks active here): start new standbys, release old ones."""
        want = desired - active
        for task in sorted(set(self.hosted) - want):
            self._release(task)
        for task in sorted(want - set(self.hosted)):
            self._host(task)

    def promote(self, task: TaskId) -> dict[str, KeyValueStore] | None:
        """The task became active here: stop tailing and hand over its open stores (None: not hosted)."""
        hosted = self.hosted.pop(task, None)
        if hosted is None:
            self._unused.pop(task, None)
            return None
        self._restorer.remove(task)
        log.info(
            "standby promoted",
            extra={"task": str(task), "checkpoints": {n: s.checkpoint() for n, s in hosted.stores.items()}},
        )
        self._on_change()
        return hosted.stores

    def active_closed(self, task: TaskId) -> None:
        """An active task was closed here; its folder stays, unused, until claimed or cleaned."""
        if task not in self.hosted:
            self._unused[task] = self._clock()

    def cleanup(self, active: set[TaskId]) -> list[TaskId]:
        """Delete the folders unused for longer than the delay; returns the tasks removed."""
        in_use = active | set(self.hosted)
        for task in in_use:
            self._unused.pop(task, None)
        gone = due_for_cleanup(self._unused, in_use, self._clock(), self._delay)
        for task in gone:
            del self._unused[task]
            statedir.remove_task(self._app_dir, task)
            log.info(
                "state of an unused task deleted", extra={"task": str(task), "delay_seconds": self._delay}
            )
        return gone

    def close(self) -> None:
        for task in sorted(self.hosted):
            hosted = self.hosted.pop(task)
            self._restorer.remove(task)
            for store in hosted.stores.values():
                store.close()

    # -- internals --------------------------------------------------------------------------
    def _host(self, task: TaskId) -> None:
        self._unused.pop(task, None)
        stores = self._open_stores(task)
        jobs = self._jobs_for(task, stores)
        for job in jobs:
            job.tail = True
            job.standby = True
        restore = TaskRestore(task, jobs, lambda _r: None, standby=True)
        self.hosted[task] = _Hosted(restore, stores)
        self._restorer.add(restore)
        log.info(
            "standby started",
            extra={"task": str(task), "checkpoints": {n: s.checkpoint() for n, s in stores.items()}},
        )
        self._on_change()

    def _release(self, task: TaskId) -> None:
        hosted = self.hosted.pop(task)
        self._restorer.remove(task)
        for store in hosted.stores.values():
            store.close()
        self._unused[task] = self._clock()
        log.info("standby stopped", extra={"task": str(task)})
        self._on_change()
