"""One container's process: start it, watch it, stop it (SIGTERM, grace, SIGKILL).

Each process runs in its own session, so a signal reaches the whole process group (a shell
and its children alike), and it carries ``BATON_PODRUNNER_NODE`` in its environment so a
new runner can find and end processes left by one that was killed (``orphans``).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

NODE_ENV = "BATON_PODRUNNER_NODE"


def now_rfc3339() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def exit_code(returncode: int) -> int:
    """A container's exit code: killed by signal N is 128 + N (SIGKILL: 137), as runtimes report it."""
    return 128 - returncode if returncode < 0 else returncode


def backoff(restarts: int, base: float, cap: float) -> float:
    """Seconds to wait before restart number ``restarts`` (1-based): base, 2*base, 4*base, ... cap."""
    if restarts <= 0:
        return 0.0
    return float(min(cap, base * 2 ** (restarts - 1)))


@dataclass
class Process:
    popen: subprocess.Popen[bytes]
    started: float

    @property
    def pid(self) -> int:
        return self.popen.pid

    def poll(self) -> int | None:
        code = self.popen.poll()
        return None if code is None else exit_code(code)

    def signal(self, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.popen.pid, sig)

    def stop(self, grace: float) -> int:
        """SIGTERM the group, wait up to ``grace`` seconds, then SIGKILL; the exit code."""
        if self.poll() is None:
            self.signal(signal.SIGTERM)
            deadline = time.monotonic() + grace
            while self.poll() is None and time.monotonic() < deadline:
                time.sleep(0.1)
        if self.poll() is None:
            self.signal(signal.SIGKILL)
            self.popen.wait()
        # children that ignored the group's SIGTERM must not outlive the container
        self.signal(signal.SIGKILL)
        code = self.poll()
        return 137 if code is None else code


def start(argv: list[str], *, env: dict[str, str], cwd: Path, log: Path, banner: str) -> Process:
    """Start ``argv`` with exactly ``env``, appending stdout and stderr to ``log``."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        out.write(f"\n--- podrunner {now_rfc3339()}: {banner}\n".encode())
        out.flush()
        popen = subprocess.Popen(
            argv,
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Process(popen=popen, started=time.monotonic())


def orphans(node: str) -> list[int]:
    """Pids of processes a previous runner of ``node`` started (by their environment marker)."""
    marker = f"{NODE_ENV}={node}\0".encode()
    found: list[int] = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):
            if marker in (proc / "environ").read_bytes() + b"\0":
                found.append(int(proc.name))
    return found


def kill_orphans(node: str) -> int:
    pids = orphans(node)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    return len(pids)
