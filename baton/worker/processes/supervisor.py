"""The pod's parent process when it runs several workers: start them, stand for them, stop them.

Decisions (docs/architecture.md, "Processes per pod"):

* A child that exits on its own stops the pod: the supervisor stops the others and exits
  with the child's status (128 + N if signal N killed it; 1 if it exited 0). That is Kafka Streams' default for a dead stream
  thread (SHUTDOWN_CLIENT); Kubernetes then restarts the container with its back-off, and
  the operator's ``Stalled`` condition sees a crash loop, which an in-pod restart would hide.
* SIGTERM/SIGINT go to every child; each commits and leaves the group within
  ``shutdown_grace_seconds``, after which it is killed.
* Children die with the supervisor (``PR_SET_PDEATHSIG``): a killed pod is all of it gone,
  as in a container, also when processes run outside one (tests, `baton run` on a laptop).
* ``/healthz``: every child alive and healthy. ``/readyz``: every child ready.
* The children join their group together (``join.py``): the first process does not own
  every task for a heartbeat and then hand half of them over.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from types import FrameType

from prometheus_client import CollectorRegistry

from baton.worker.config import WorkerConfig, env_var
from baton.worker.processes.join import JoinBarrier
from baton.worker.processes.plan import ProcessSlot, config_env, plan
from baton.worker.processes.scrape import ChildrenCollector, fetch, proxy_query
from baton.worker.runtime import health

log = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: nothing to import in the child
_CONFIG_VARS = frozenset(env_var(field) for field in WorkerConfig.model_fields)


def free_ports(count: int) -> list[int]:
    """Ports nothing listens on now, for the children's private metrics servers."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def child_ports(pod_port: int, count: int) -> list[int]:
    """The children's ports: the ones after the pod's, so a restarted pod's processes keep
    their addresses (interactive queries route to what a member advertised when it joined,
    and a static member that rejoins does not make the group rebalance); free ones when
    the pod's port is itself picked at random (0, in tests)."""
    if pod_port == 0:
        return free_ports(count)
    return [pod_port + 1 + i for i in range(count)]


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL when the supervisor dies (Linux)."""
    with contextlib.suppress(AttributeError, OSError):  # not Linux: children may outlive a killed supervisor
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def _exit_status(returncode: int) -> int:
    """A child's return code as a shell would report it: killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


class Supervisor:
    def __init__(self, config: WorkerConfig, host: str | None = None) -> None:
        if config.processes < 2:
            raise ValueError("a supervisor runs two processes or more")
        self.config = config
        self.host = host or config.instance_id or socket.gethostname()
        self.slots: list[ProcessSlot] = []
        self.children: list[subprocess.Popen[bytes]] = []
        self._stop = threading.Event()
        self.server: ThreadingHTTPServer | None = None
        self._join_dir: Path | None = None

    def _env(self, slot: ProcessSlot) -> dict[str, str]:
        inherited = {k: v for k, v in os.environ.items() if k not in _CONFIG_VARS}
        barrier = {}
        if self._join_dir is not None:  # the pod's processes join their group together (join.py)
            barrier = JoinBarrier(self._join_dir, self.config.processes, slot.index).env()
        return inherited | config_env(slot.config) | barrier

    def _start(self, slot: ProcessSlot) -> subprocess.Popen[bytes]:
        # preexec_fn runs between fork and exec; safe here because every child is started
        # before the supervisor starts its first thread (the HTTP server)
        child = subprocess.Popen(
            [sys.executable, "-m", "baton.cli", "run"],
            env=self._env(slot),
            preexec_fn=_die_with_parent,  # noqa: PLW1509
        )
        log.info(
            "worker process started",
            extra={
                "child": slot.index,
                "pid": child.pid,
                "instance_id": slot.config.instance_id,
                "state_dir": str(slot.config.state_dir),
                "host": slot.config.host,
            },
        )
        return child

    def _ports(self) -> list[tuple[str, int]]:
        return [(str(s.index), s.config.metrics_port) for s in self.slots]

    def _all_answer(self, path: str) -> bool:
        if any(child.poll() is not None for child in self.children):
            return False
        return all(fetch(port, path)[0] == 200 for _, port in self._ports())

    def healthy(self) -> bool:
        return self._all_answer("/healthz")

    def ready(self) -> bool:
        return bool(self.children) and self._all_answer("/readyz")

    def stop(self) -> None:
        self._stop.set()

    def run(self) -> int:
        self.slots = plan(
            self.config, self.host, child_ports(self.config.metrics_port, self.config.processes)
        )

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            log.info("stopping the pod's worker processes", extra={"signal": signal.Signals(signum).name})
            self.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        self._join_dir = JoinBarrier.prepare(self.config.state_dir)
        self.children = [self._start(slot) for slot in self.slots]  # before any thread: see _start
        registry = CollectorRegistry()
        registry.register(ChildrenCollector(self._ports))
        first = self.slots[0].config.metrics_port
        self.server = health.serve(
            self.config.metrics_port,
            registry,
            self.healthy,
            self.ready,
            lambda path, params: proxy_query(first, path, params),
            by_name=False,
        )
        log.info(
            "http listening",
            extra={"port": self.server.server_address[1], "processes": len(self.children)},
        )
        try:
            failed = self._watch()
            codes = self._stop_all()
        finally:
            self.server.shutdown()
        if failed is not None:
            return _exit_status(codes[failed]) or 1
        return next((_exit_status(code) for code in codes if code), 0)

    def _watch(self) -> int | None:
        """Until stopped (None) or a child exits on its own (its index)."""
        while not self._stop.wait(0.5):
            for index, child in enumerate(self.children):
                code = child.poll()
                if code is not None:
                    log.error(
                        "worker process exited; stopping the pod's other processes",
                        extra={"child": index, "pid": child.pid, "exit_code": code},
                    )
                    return index
        return None

    def _stop_all(self) -> list[int]:
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)
        deadline = self.config.shutdown_grace_seconds + 5
        codes = []
        for index, child in enumerate(self.children):
            try:
                code = child.wait(deadline)
            except subprocess.TimeoutExpired:
                log.error("worker process did not stop in time; killing it", extra={"child": index})
                child.kill()
                code = child.wait()
            codes.append(code)
        log.info("worker processes stopped", extra={"exit_codes": codes})
        return codes
