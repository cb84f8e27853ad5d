"""The layout of ``state.dir``: a stable process id, an exclusive lock, one folder per task.

``state_dir/<application.id>/<task>/<store>`` is the same path whether the task runs
here as active or as standby, so promoting a standby opens the very store it filled and
replays only the changelog after its checkpoint. The process id written here on first
start (Kafka Streams' ``processId``) gives a worker without ``--instance-id`` the same
identity after a restart: the same ``client.id`` and ``transactional.id``, and the same
place in the standby ring.

Two processes sharing one state dir would corrupt each other's checkpoints; the lock
makes the second one fail at start with a message instead.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import uuid
from pathlib import Path

from baton.worker.naming import TaskId


def process_id(app_dir: Path) -> str:
    """A stable id for this state dir, made once and kept."""
    path = app_dir / "process-id"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        app_dir.mkdir(parents=True, exist_ok=True)
        pid = uuid.uuid4().hex[:12]
        path.write_text(pid + "\n")
        return pid


class StateDirLocked(RuntimeError):
    pass


def lock(app_dir: Path) -> int:
    """Hold an exclusive lock on ``app_dir`` for the life of the process; returns the fd."""
    app_dir.mkdir(parents=True, exist_ok=True)
    fd = os.open(app_dir / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise StateDirLocked(f"{app_dir} is in use by another worker process") from None
    return fd


def task_dirs(app_dir: Path) -> set[TaskId]:
    """Tasks that have a folder of stores here (active, standby, or left over)."""
    out: set[TaskId] = set()
    if not app_dir.is_dir():
        return out
    for child in app_dir.iterdir():
        if child.is_dir():
            try:
                out.add(TaskId.parse(child.name))
            except ValueError:
                continue
    return out


def remove_task(app_dir: Path, task: TaskId) -> None:
    shutil.rmtree(app_dir / str(task), ignore_errors=True)
