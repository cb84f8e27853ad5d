"""Per-Pod port remapping: every Pod shares 127.0.0.1, so each gets its own local ports.

The mapping (container port -> local port) is chosen once per Pod uid, kept across
container restarts, and published in the Pod annotation ``podrunner.baton.dev/ports``
(``{"8080": 41234}``) so tests, the demo and the operator can reach ``/readyz`` and
``/metrics``. A ``hostPort`` is honoured as the local port.
"""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Mapping
from typing import Any

ANNOTATION = "podrunner.baton.dev/ports"


def container_ports(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [p for c in pod["spec"]["containers"] for p in c.get("ports") or []]


def plan(
    pod: Mapping[str, Any], free_port: Callable[[], int], previous: Mapping[int, int] | None = None
) -> dict[int, int]:
    """Container port -> local port: the previous mapping (a runner restart) when it still applies."""
    out: dict[int, int] = {}
    for port in container_ports(pod):
        number = int(port["containerPort"])
        if number in out:
            continue
        if port.get("hostPort"):
            out[number] = int(port["hostPort"])
        elif previous and number in previous:
            out[number] = previous[number]
        else:
            out[number] = free_port()
    return out


def named(pod: Mapping[str, Any]) -> dict[str, int]:
    """Port name -> container port, for probes that name their port (``port: metrics``)."""
    return {p["name"]: int(p["containerPort"]) for p in container_ports(pod) if p.get("name")}


def resolve(port: int | str, pod: Mapping[str, Any], mapping: Mapping[int, int]) -> int:
    """A probe's ``port`` (number or name) -> the local port to connect to."""
    number = named(pod)[port] if isinstance(port, str) and not port.isdigit() else int(port)
    return mapping.get(number, number)


def encode(mapping: Mapping[int, int]) -> str:
    return json.dumps({str(k): v for k, v in sorted(mapping.items())}, separators=(",", ":"))


def decode(pod: Mapping[str, Any]) -> dict[int, int]:
    raw = (pod["metadata"].get("annotations") or {}).get(ANNOTATION)
    if not raw:
        return {}
    try:
        return {int(k): int(v) for k, v in json.loads(raw).items()}
    except (ValueError, AttributeError):
        return {}


class Allocator:
    """Free local ports, never handing out one twice while a Pod holds it (its process may not listen yet)."""

    def __init__(self) -> None:
        self._held: set[int] = set()
        self._lock = threading.Lock()

    def free_port(self) -> int:
        with self._lock:
            while True:
                with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
                    s.bind(("127.0.0.1", 0))
                    port = int(s.getsockname()[1])
                if port not in self._held:
                    self._held.add(port)
                    return port

    def hold(self, ports: list[int]) -> None:
        with self._lock:
            self._held.update(ports)

    def release(self, ports: list[int]) -> None:
        with self._lock:
            self._held.difference_update(ports)
