"""How far a restore has come, for a log line every few seconds and the remaining-records gauge.

Why: a restore of a large store takes minutes, and until now only its end was logged; an
operator watching a Pod that is not Ready could not tell a slow restore from a stuck one. Each
store being restored reports, at most every ``interval`` seconds, what it has applied, what is
left, its rate since it started and when it should end at that rate. Pure apart from the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Seen:
    origin: int  # the offset the restore began at: another origin is another restore
    started: float
    restored: int = 0
    logged: float = 0.0


@dataclass
class RestoreProgress:
    interval: float = 10.0
    clock: Callable[[], float] = time.monotonic
    _seen: dict[tuple[str, str], _Seen] = field(default_factory=dict)

    def update(
        self, task: str, store: str, origin: int, applied: int, remaining: int
    ) -> dict[str, Any] | None:
        """Count ``applied`` more records of the restore that began at offset ``origin``; the
        fields of a progress line when one is due, else None. One entry per task and store."""
        now = self.clock()
        seen = self._seen.get((task, store))
        if seen is None or seen.origin != origin:
            seen = self._seen[(task, store)] = _Seen(origin=origin, started=now, logged=now)
        seen.restored += applied
        if now - seen.logged < self.interval:
            return None
        seen.logged = now
        rate = seen.restored / max(now - seen.started, 1e-9)
        return {
            "task": task,
            "store": store,
            "restored": seen.restored,
            "remaining": remaining,
            "records_per_second": round(rate),
            "expected_seconds": round(remaining / rate, 1) if rate > 0 else None,
        }
