"""kubectl's and helm's duration flags (Go's ``time.Duration`` text), read as seconds for the tests."""

from __future__ import annotations

import re

_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|h|m|s)")


def go_duration_seconds(text: str) -> float:
    """``"180s"`` -> 180.0, ``"1m30s"`` -> 90.0, ``"500ms"`` -> 0.5; ValueError for anything else."""
    if text in {"0", "-0", "+0"}:
        return 0.0
    parts = _PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        raise ValueError(f"not a Go duration: {text!r}")
    return sum(float(n) * _UNITS[u] for n, u in parts)


def cli_deadline(args: tuple[str, ...], floor: float = 120.0, margin: float = 30.0) -> float:
    """How long a kubectl or helm call may run: ``floor`` seconds, or ``margin`` longer than its
    own ``--timeout`` (e.g. ``kubectl wait --timeout=180s``), so the tool gets to report what it
    waited for instead of being cut off by the test with a bare TimeoutExpired."""
    own = max(
        (go_duration_seconds(a.split("=", 1)[1]) for a in args if a.startswith("--timeout=")), default=0.0
    )
    return max(floor, own + margin)
