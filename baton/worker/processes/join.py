"""The processes of one pod join their group together: a barrier before the first JoinGroup.

A pod's processes start at once, but each reaches its first JoinGroup after its own
start-up (imports, the topology, metadata), ~0.1 s apart here. The first then gets a
generation of its own with every task, and hears of its sibling only at its next
heartbeat (1 s): for that second one process does the pod's work, then hands half the
tasks over, and their new owner restores what the first wrote meanwhile. Members whose
JoinGroups reach the coordinator within a few milliseconds of each other are in one
rebalance: two static members released together had their tasks ~60 ms after joining,
half each, in 3 of 3 tries (on the local broker, which starts a group's first generation
at once: ``group.initial.rebalance.delay.ms=0``).

So the supervisor makes an empty directory at each pod start and tells every child where
it is, how many processes the pod runs and which one the child is (``BATON_POD_JOIN``).
A child marks itself there right before its first JoinGroup and waits until every
sibling has, for ``TIMEOUT_S`` at most: a sibling stuck in its start-up holds the others
no longer than that, and they join without it, as they did before. A file per process in
the pod's state volume is all the processes share without a parent they were forked from
(the supervisor starts them with ``exec``).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

ENV = "BATON_POD_JOIN"  # set by the supervisor for its children; not a WorkerConfig setting
DIRECTORY = ".pod-join"  # under the pod's state.dir
TIMEOUT_S = 10.0


@dataclass(frozen=True)
class JoinBarrier:
    directory: Path
    parties: int
    index: int

    @staticmethod
    def prepare(state_dir: Path) -> Path:
        """The supervisor, at each pod start: an empty directory (what a previous start left goes)."""
        directory = state_dir / DIRECTORY
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        return directory

    def env(self) -> dict[str, str]:
        return {
            ENV: json.dumps({"directory": str(self.directory), "parties": self.parties, "index": self.index})
        }

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> JoinBarrier | None:
        """The barrier a child of a supervisor was given; None for a pod of one process."""
        raw = environ.get(ENV)
        if not raw:
            return None
        spec = json.loads(raw)
        return cls(Path(spec["directory"]), int(spec["parties"]), int(spec["index"]))

    def wait(self, timeout: float = TIMEOUT_S, every: float = 0.002) -> bool:
        """Mark this process ready to join; True once every process of the pod is, False after ``timeout``."""
        (self.directory / str(self.index)).touch()
        deadline = time.monotonic() + timeout
        while sum(1 for _ in self.directory.iterdir()) < self.parties:
            if time.monotonic() >= deadline:
                return False
            time.sleep(every)
        return True

    def before_join(self) -> None:
        """``Membership``'s hook: wait for the siblings, and say how it went."""
        started = time.monotonic()
        together = self.wait()
        waited_ms = round((time.monotonic() - started) * 1000)
        if together:
            log.info("joining with the pod's other processes", extra={"waited_ms": waited_ms})
        else:
            log.warning(
                "the pod's other processes are not ready to join; joining without them",
                extra={"waited_ms": waited_ms, "processes": self.parties},
            )
