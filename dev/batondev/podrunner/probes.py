"""Readiness and liveness probes against a Pod's local ports.

``Tracker`` holds the kubelet's threshold rules (pure, unit tested); ``check`` runs one
probe: ``httpGet`` (2xx/3xx is success), ``tcpSocket`` or ``exec``. A named port
(``port: metrics``) is resolved through the Pod's container ports, then remapped.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batondev.podrunner import portmap


@dataclass
class Tracker:
    """Consecutive successes/failures against the probe's thresholds.

    ``healthy`` starts False for readiness (not Ready until a probe passes) and True for
    liveness (alive until ``failureThreshold`` probes in a row fail).
    """

    probe: Mapping[str, Any]
    healthy: bool
    started: float
    successes: int = 0
    failures: int = 0
    next_at: float = field(default=0.0)

    def __post_init__(self) -> None:
        self.next_at = self.started + float(self.probe.get("initialDelaySeconds") or 0)

    @property
    def period(self) -> float:
        return float(self.probe.get("periodSeconds") or 10)

    @property
    def timeout(self) -> float:
        return float(self.probe.get("timeoutSeconds") or 1)

    def due(self, now: float) -> bool:
        return now >= self.next_at

    def record(self, ok: bool, now: float) -> None:
        self.next_at = now + self.period
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= int(self.probe.get("successThreshold") or 1):
                self.healthy = True
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.failures >= int(self.probe.get("failureThreshold") or 3):
                self.healthy = False


def _http(probe: Mapping[str, Any], port: int, timeout: float) -> bool:
    scheme = str(probe.get("scheme") or "HTTP").lower()
    path = str(probe.get("path") or "/")
    request = urllib.request.Request(f"{scheme}://127.0.0.1:{port}{path}")
    for header in probe.get("httpHeaders") or []:
        request.add_header(header["name"], header["value"])
    context = (
        ssl._create_unverified_context() if scheme == "https" else None
    )  # the kubelet skips verification too
    try:
        with urllib.request.urlopen(request, timeout=timeout, context=context) as response:
            return 200 <= int(response.status) < 400
    except urllib.error.HTTPError as exc:
        return 200 <= exc.code < 400
    except (OSError, ValueError):
        return False


def _tcp(port: int, timeout: float) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        return s.connect_ex(("127.0.0.1", port)) == 0


def check(
    probe: Mapping[str, Any],
    pod: Mapping[str, Any],
    ports: Mapping[int, int],
    *,
    env: Mapping[str, str],
    cwd: Path,
) -> bool:
    """Run one probe now; any error counts as a failure."""
    timeout = float(probe.get("timeoutSeconds") or 1)
    with contextlib.suppress(KeyError, ValueError):
        if "httpGet" in probe:
            return _http(probe["httpGet"], portmap.resolve(probe["httpGet"]["port"], pod, ports), timeout)
        if "tcpSocket" in probe:
            return _tcp(portmap.resolve(probe["tcpSocket"]["port"], pod, ports), timeout)
        if "grpc" in probe:  # no gRPC health client here: a listening port is the best we can say
            return _tcp(portmap.resolve(probe["grpc"]["port"], pod, ports), timeout)
        if "exec" in probe:
            try:
                done = subprocess.run(
                    probe["exec"]["command"],
                    env=dict(env),
                    cwd=cwd,
                    capture_output=True,
                    timeout=timeout,
                )
            except (OSError, subprocess.TimeoutExpired):
                return False
            return done.returncode == 0
    return False
