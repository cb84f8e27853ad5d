"""One container of a running Pod: its process, probes, restarts and status view.

``tick`` is called about twice a second by the Pod's thread. It starts the process when
due, notices when it exits, applies ``restartPolicy`` with exponential back-off
(``--backoff-base`` doubling to ``--backoff-cap``: much shorter than the kubelet's
10 s -> 5 min, so tests that kill processes stay fast), and runs the readiness and liveness
probes. The process's env and argv come from ``launch`` (built by the Pod) at each start,
so a Secret fixed after a CreateContainerConfigError is picked up on the next try.
"""

from __future__ import annotations

import shlex
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batondev.podrunner import ocirun, ocispec, probes, process
from batondev.podrunner.envresolve import ConfigError
from batondev.podrunner.status import ContainerView

# How long a process must run before its crash back-off starts over (the kubelet uses 10 min).
BACKOFF_RESET_SECONDS = 60.0


@dataclass(frozen=True)
class Launch:
    """Everything one start of the process needs, resolved and rewritten for this host."""

    argv: list[str]
    env: dict[str, str]
    cwd: Path
    log: Path
    readiness: Mapping[str, Any] | None
    liveness: Mapping[str, Any] | None
    oci: ocirun.OciLaunch | None = None  # OCI mode: run this under the runtime, argv/env are the container's
    runtime: ocirun.OciRuntime | None = None


@dataclass
class Policy:
    restart: str  # Always, OnFailure, Never
    grace: float  # terminationGracePeriodSeconds, for a liveness kill
    backoff_base: float
    backoff_cap: float


@dataclass
class Container:
    spec: Mapping[str, Any]
    policy: Policy
    launch: Callable[[], Launch]
    probe: Callable[[Mapping[str, Any], Launch], bool]
    view: ContainerView = field(init=False)
    proc: process.Process | None = None
    current: Launch | None = None
    readiness: probes.Tracker | None = None
    liveness: probes.Tracker | None = None
    next_start: float = 0.0
    crashes: int = 0
    done: bool = False
    kill_at: float | None = None
    kill_reason: str = ""

    def __post_init__(self) -> None:
        self.view = ContainerView(name=self.spec["name"], image=self.spec.get("image", ""))

    def resume(self, previous: Mapping[str, Any] | None) -> None:
        """Carry restartCount over from the Pod's status (a new runner took over a running Pod)."""
        if not previous:
            return
        self.view.restart_count = int(previous.get("restartCount") or 0)
        self.view.last_terminated = (previous.get("lastState") or {}).get("terminated")
        if "running" in (previous.get("state") or {}) or "terminated" in (previous.get("state") or {}):
            self.view.restart_count += 1  # its process is gone: this start is a restart

    def tick(self, now: float) -> None:
        if self.proc is None:
            if not self.done and now >= self.next_start:
                self._start(now)
            return
        code = self.proc.poll()
        if code is not None:
            self._exited(code, now)
            return
        if self.kill_at is not None and now >= self.kill_at:
            self.proc.signal(signal.SIGKILL)
        self._probe(now)

    def _start(self, now: float) -> None:
        try:
            launch = self.launch()
        except (ConfigError, ocispec.ImageConfigError) as exc:
            self.view.state, self.view.reason, self.view.message = (
                "waiting",
                "CreateContainerConfigError",
                str(exc),
            )
            self.next_start = now + 2.0
            return
        except ocirun.ImageMissing as exc:
            self.view.state, self.view.reason, self.view.message = "waiting", "ErrImageNeverPull", str(exc)
            self.next_start = now + 5.0
            return
        if not launch.argv:
            self.view.state, self.view.reason = "waiting", "CreateContainerError"
            self.view.message = "no command: the pod runner cannot read the image's entrypoint; set command"
            self.next_start = now + 5.0
            return
        if self.view.ever_started:
            self.view.restart_count += 1
        banner = shlex.join(launch.argv).replace("\n", "\\n")[:300]
        try:
            if launch.oci is not None and launch.runtime is not None:
                self.proc = launch.runtime.start(
                    launch.oci, env=launch.env, log=launch.log, banner=f"[{launch.runtime.binary}] {banner}"
                )
            else:
                self.proc = process.start(
                    launch.argv, env=launch.env, cwd=launch.cwd, log=launch.log, banner=banner
                )
        except (OSError, subprocess.CalledProcessError) as exc:
            self.view.state, self.view.reason, self.view.message = "waiting", "RunContainerError", str(exc)
            self.next_start = now + 2.0
            return
        self.current = launch
        self.kill_at, self.kill_reason = None, ""
        self.view.state, self.view.reason, self.view.message = "running", "", ""
        self.view.pid, self.view.started_at, self.view.finished_at = (
            self.proc.pid,
            process.now_rfc3339(),
            None,
        )
        self.view.exit_code, self.view.ready = None, launch.readiness is None
        self.readiness = (
            probes.Tracker(launch.readiness, healthy=False, started=now) if launch.readiness else None
        )
        self.liveness = (
            probes.Tracker(launch.liveness, healthy=True, started=now) if launch.liveness else None
        )

    def _exited(self, code: int, now: float) -> None:
        assert self.proc is not None
        ran = now - self.proc.started
        self.proc = None
        self.view.state, self.view.exit_code, self.view.ready = "terminated", code, False
        self.view.finished_at = process.now_rfc3339()
        self.view.reason = self.kill_reason or ("Completed" if code == 0 else "Error")
        restart = self.policy.restart == "Always" or (self.policy.restart == "OnFailure" and code != 0)
        if not restart:
            self.done = True
            return
        self.crashes = 1 if ran >= BACKOFF_RESET_SECONDS else self.crashes + 1
        delay = process.backoff(self.crashes, self.policy.backoff_base, self.policy.backoff_cap)
        self.view.last_terminated = self.view.terminated_state()
        self.view.state, self.view.reason = "waiting", "CrashLoopBackOff"
        self.view.message = f"back-off {delay:.0f}s restarting failed container={self.view.name}"
        self.next_start = now + delay

    def _probe(self, now: float) -> None:
        assert self.current is not None
        if self.readiness is not None and self.readiness.due(now):
            self.readiness.record(self.probe(self.readiness.probe, self.current), time.monotonic())
            self.view.ready = self.readiness.healthy
        if self.liveness is not None and self.kill_at is None and self.liveness.due(now):
            self.liveness.record(self.probe(self.liveness.probe, self.current), time.monotonic())
            if not self.liveness.healthy and self.proc is not None:
                self.kill_reason = "Error"
                self.view.message = "Liveness probe failed"
                self.proc.signal(signal.SIGTERM)
                self.kill_at = now + self.policy.grace

    def stop(self, grace: float) -> None:
        """SIGTERM, wait ``grace``, SIGKILL; no restart afterwards."""
        self.done = True
        if self.proc is not None:
            code = self.proc.stop(grace)
            self.view.state, self.view.exit_code, self.view.ready = "terminated", code, False
            self.view.finished_at = process.now_rfc3339()
            self.view.reason = "Completed" if code == 0 else "Error"
            self.proc = None

    def begin_stop(self) -> None:
        """SIGTERM now (the Pod stops all its containers in parallel, then waits)."""
        self.done = True
        if self.proc is not None:
            self.proc.signal(signal.SIGTERM)
