"""Start, find and stop the stack's background processes by pid file."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

from . import paths


class PortInUse(RuntimeError):
    """A port the stack needs is held by a process that is not the stack's own."""


class NotReady(RuntimeError):
    """A component did not become ready in time; the message points at its log."""


def pid_file(name: str) -> Path:
    return paths.RUN / name / "pid"


def log_file(name: str) -> Path:
    return paths.RUN / name / "log"


def running_pid(name: str) -> int | None:
    """The pid of the stack's ``name`` process if it is alive."""
    try:
        pid = int(pid_file(name).read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    # a recycled pid belongs to something else: check it is still ours
    environ = _environ(pid)
    return pid if f"BATON_STACK_COMPONENT={name}".encode() in environ else None


def _environ(pid: int) -> bytes:
    """The process's environment; b"" for a zombie or a pid that is gone.

    Right after ``Popen`` returns, the child can still be inside ``execve``: the kernel closes
    the close-on-exec pipe that Popen waits on before it has set up the new program's stack,
    and ``/proc/PID/environ`` reads empty meanwhile. Seen once as "etcd exited during
    start-up" with etcd running fine. So an empty environment of a live, non-zombie
    process is read again for a moment before it counts as not ours.
    """
    for _ in range(40):
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return b""
        if environ or stat.rpartition(")")[2].split()[0] in ("Z", "X"):
            return environ
        time.sleep(0.05)
    return b""


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time the process has used so far (Linux ``/proc``)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def process_tree(pid: int) -> list[int]:
    """A process and its living descendants: a pod's supervisor and its workers.

    Listed once per run, not per CPU sample: a listing reads every process's ``stat``.
    """
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):  # gone between the listing and the read
                ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += children.get(current, [])
    return tree


def busy_seconds() -> float:
    """CPU time all cores have spent on anything but idling and waiting, since boot."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(
        int, Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def ensure_ports_free(name: str, ports: list[int]) -> None:
    """Refuse to start when another program already listens on a port we need."""
    busy = [p for p in ports if port_open(p)]
    if busy:
        raise PortInUse(
            f"{name}: port(s) {', '.join(map(str, busy))} on 127.0.0.1 are already in use by another "
            f"program (not this stack). Stop it, or choose other ports with BATON_PORT_BASE."
        )


def start(name: str, cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path | None = None) -> int:
    """Start ``cmd`` detached (own session, so it outlives the caller), logging to its log file."""
    (paths.RUN / name).mkdir(parents=True, exist_ok=True)
    full_env = dict(os.environ if env is None else env)
    full_env["BATON_STACK_COMPONENT"] = name
    with open(log_file(name), "ab") as log:
        proc = subprocess.Popen(
            cmd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=full_env,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
        )
    pid_file(name).write_text(str(proc.pid))
    return proc.pid


def wait_started(name: str, check: Callable[[], bool], timeout: float) -> None:
    """Poll ``check`` until it holds; fail fast when the process died, with its log tail."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            if check():
                return
        if running_pid(name) is None:
            raise NotReady(f"{name} exited during start-up; last lines of {log_file(name)}:\n{tail(name)}")
        time.sleep(0.25)
    raise NotReady(f"{name} not ready after {timeout:.0f}s; last lines of {log_file(name)}:\n{tail(name)}")


def tail(name: str, lines: int = 25) -> str:
    try:
        return "\n".join(log_file(name).read_text(errors="replace").splitlines()[-lines:])
    except FileNotFoundError:
        return "(no log)"


def stop(name: str, timeout: float = 20.0) -> bool:
    """SIGTERM the process group, then SIGKILL after ``timeout``; True if something was stopped."""
    pid = running_pid(name)
    if pid is None:
        pid_file(name).unlink(missing_ok=True)
        return False
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and running_pid(name) is not None:
        time.sleep(0.2)
    if running_pid(name) is not None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        time.sleep(0.5)
    pid_file(name).unlink(missing_ok=True)
    return True
