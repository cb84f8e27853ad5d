"""Run a pod runner for the length of a test or a demo step (dev and test tooling).

``running(namespace)`` starts ``python -m batondev.podrunner run`` in its own session with
a Node of its own (so tests running side by side never share one), yields a handle that
knows the log and can read a Pod's local ports, and stops it afterwards (SIGTERM: the
runner stops its Pods' processes and removes its Node).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batondev import kube, paths
from batondev.podrunner import portmap, process


@dataclass
class RunnerHandle:
    node: str
    popen: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> bool:
        return self.popen.poll() is None

    def tail(self, lines: int = 40) -> str:
        with contextlib.suppress(FileNotFoundError):
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def stop(self, timeout: float = 40.0) -> int:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        process.kill_orphans(self.node)  # belt and braces: nothing of ours outlives the test
        return int(self.popen.returncode)


def local_ports(pod: Mapping[str, Any]) -> dict[int, int]:
    """Container port -> local port, from the Pod's ``podrunner.baton.dev/ports`` annotation."""
    return portmap.decode(pod)


@contextlib.contextmanager
def running(
    *namespaces: str,
    selector: str | None = None,
    node: str | None = None,
    extra: list[str] | None = None,
    log_dir: Path | None = None,
) -> Iterator[RunnerHandle]:
    """A pod runner for ``namespaces`` (and/or ``selector``) until the block ends."""
    node = node or f"podrunner-{uuid.uuid4().hex[:8]}"
    log = (log_dir or paths.RUN / "podrunner-harness") / f"{node}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.unlink(missing_ok=True)  # a fresh log, so "ready" below is this runner's
    argv = [
        sys.executable,
        "-m",
        "batondev.podrunner",
        "run",
        "--node",
        node,
        "--kubeconfig",
        str(kube.kubeconfig()),
    ]
    for ns in namespaces:
        argv += ["--namespace", ns]
    if selector:
        argv += ["--selector", selector]
    argv += extra or []
    env = dict(os.environ)
    dev = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = dev + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with open(log, "ab") as out:
        popen = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    handle = RunnerHandle(node=node, popen=popen, log=log)
    try:
        deadline = time.monotonic() + 30
        while f"node {node} ready (" not in handle.tail(5) and time.monotonic() < deadline:
            if not handle.alive():
                raise RuntimeError(f"podrunner exited at start-up:\n{handle.tail()}")
            time.sleep(0.1)
        yield handle
    finally:
        handle.stop()
