"""Point a container's env and args at the local stand-ins of its mounts and ports.

A local process cannot mount a volume at ``/var/lib/baton`` or listen on the Pod's own
``:8080``, so the pod runner rewrites what the process is told instead. Two rules, both
pure and unit tested:

**Paths.** Every occurrence of a volumeMount's ``mountPath`` as a whole path prefix, in any
env value or argument, becomes the mount's local directory: ``/var/lib/baton``,
``/var/lib/baton/x``, ``--state-dir=/var/lib/baton`` and ``{"ssl.ca.location":
"/etc/baton/kafka/ca.crt"}`` are all rewritten; ``/var/lib/baton2`` and
``/opt/var/lib/baton`` are not. The longest mount path wins.

**Ports.** An env variable whose name ends in ``PORT`` and whose value is exactly a
``containerPort`` (``BATON_METRICS_PORT=8080``, ``PORT=8080``) gets the Pod's local port,
and so does an argument ``--…port…=8080`` or the argument after a ``--…port…`` flag.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

_PATH_CHAR = r"A-Za-z0-9_.\-"


def path_pattern(mount_paths: list[str]) -> re.Pattern[str] | None:
    """One regex matching any of ``mount_paths`` as a whole path prefix, longest first."""
    paths = sorted({p.rstrip("/") for p in mount_paths if p.rstrip("/")}, key=len, reverse=True)
    if not paths:
        return None
    alternatives = "|".join(re.escape(p) for p in paths)
    return re.compile(rf"(?<![{_PATH_CHAR}/])(?:{alternatives})(?=/|$|[^{_PATH_CHAR}])")


def rewrite_paths(value: str, mounts: Mapping[str, Path]) -> str:
    """``value`` with each mount path replaced by its local directory (see the module doc)."""
    pattern = path_pattern(list(mounts))
    if pattern is None:
        return value
    local = {k.rstrip("/"): str(v) for k, v in mounts.items()}
    return pattern.sub(lambda m: local[m.group(0)], value)


def rewrite_env_ports(env: Mapping[str, str], ports: Mapping[int, int]) -> dict[str, str]:
    """``*PORT`` variables that hold a container port now hold the local port."""
    out = dict(env)
    for name, value in env.items():
        if name.upper().endswith("PORT") and value.strip().isdigit() and int(value) in ports:
            out[name] = str(ports[int(value)])
    return out


def rewrite_arg_ports(args: list[str], ports: Mapping[int, int]) -> list[str]:
    """``--metrics-port=8080`` and ``--port 8080`` name the local port instead."""
    out: list[str] = []
    after_port_flag = False
    for arg in args:
        flag, eq, value = arg.partition("=")
        new = arg
        if after_port_flag and arg.isdigit() and int(arg) in ports:
            new = str(ports[int(arg)])
        elif (
            eq and flag.startswith("-") and "port" in flag.lower() and value.isdigit() and int(value) in ports
        ):
            new = f"{flag}={ports[int(value)]}"
        after_port_flag = not eq and arg.startswith("-") and "port" in arg.lower()
        out.append(new)
    return out
