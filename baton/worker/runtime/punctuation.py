"""When a task's punctuators fire (pure: times in, callbacks out).

Both kinds fire when their clock crosses a multiple of the interval, aligned to the
epoch, so when they fire depends on the clock alone and not on when the processor was
initialized. For stream time that makes a punctuator a function of the input: with the
task's stream time committed alongside its offsets, a restarted task fires exactly where
an uninterrupted one would have. A clock that jumps over several multiples fires once
(Kafka Streams does the same for stream time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from baton.worker.topology.custom import PunctuationType

NO_TIME = -(2**63)


@dataclass(eq=False)
class Schedule:
    interval_ms: int
    kind: PunctuationType
    callback: Callable[[int], None]
    cancelled: bool = False

    def cancel(self) -> None:
        self.cancelled = True


def crossed(interval_ms: int, before: int, now: int) -> bool:
    """Did the clock cross a multiple of ``interval_ms`` going from ``before`` to ``now``?

    An unknown ``before`` (a task that never saw a record) crosses nothing: the first
    record starts the clock.
    """
    if before == NO_TIME or now <= before:
        return False
    return now // interval_ms > before // interval_ms


class Punctuations:
    """One task's punctuators."""

    def __init__(self) -> None:
        self.schedules: list[Schedule] = []
        self._wall_before: int | None = None

    def add(self, interval_ms: int, kind: PunctuationType, callback: Callable[[int], None]) -> Schedule:
        if interval_ms < 1:
            raise ValueError("a punctuation interval must be at least 1 ms")
        schedule = Schedule(interval_ms, PunctuationType(kind), callback)
        self.schedules.append(schedule)
        return schedule

    def due_on_stream_time(self, before: int, now: int) -> list[Schedule]:
        return self._due(PunctuationType.STREAM_TIME, before, now)

    def due_on_wall_clock(self, now: int) -> list[Schedule]:
        before, self._wall_before = self._wall_before, now
        return [] if before is None else self._due(PunctuationType.WALL_CLOCK, before, now)

    def _due(self, kind: PunctuationType, before: int, now: int) -> list[Schedule]:
        self.schedules = [s for s in self.schedules if not s.cancelled]
        return [s for s in self.schedules if s.kind is kind and crossed(s.interval_ms, before, now)]
