"""Custom processors and punctuators: Kafka Streams' Processor API, in Python.

    class Dedupe(Processor):
        def init(self, context: ProcessorContext) -> None:
            super().init(context)
            self.seen = context.store("seen")
            context.schedule(60_000, PunctuationType.STREAM_TIME, self.forget_old)

        def process(self, key, value) -> None:
            if self.seen.get(key) is None:
                self.seen.put(key, self.context.timestamp)
                self.context.forward(key, value)

    topology.store("seen", key=STR, value=LONG)
    stream.process(Dedupe, stores=["seen"]).to("unique")

A processor sees one record at a time, may read and write the stores it names (each with
a changelog, restore, standbys and exactly-once like every other store), forward any
number of records, and schedule **punctuators**: callbacks on stream time (event time,
the largest record timestamp the task has seen) or on the wall clock. Whatever a
punctuator writes or forwards is part of the same transaction as the records processed
around it. This module is the user-facing contract only; the runtime implements it.
"""

from __future__ import annotations

from datetime import timedelta
from enum import StrEnum
from typing import Any, Protocol


class PunctuationType(StrEnum):
    """What drives a punctuator.

    ``STREAM_TIME`` fires when the task's stream time crosses a multiple of the interval
    (once, however many multiples one record jumps over), called with the stream time.
    It depends only on the input, so its output is exact across crashes (the task's
    stream time is committed with its offsets) and across blue-green flips.
    ``WALL_CLOCK`` fires when the system clock crosses a multiple of the interval, also
    while no record arrives; like ``time.time()`` in your code, what it emits differs
    between runs and between colors.
    """

    STREAM_TIME = "stream_time"
    WALL_CLOCK = "wall_clock"


class StateStore(Protocol):
    """A key-value store a processor named in ``stream.process(..., stores=[...])``."""

    def get(self, key: Any) -> Any:
        """The value, or None."""

    def put(self, key: Any, value: Any) -> None:
        """Set the value; None deletes the key."""

    def delete(self, key: Any) -> None: ...


class Cancellable(Protocol):
    def cancel(self) -> None: ...


class ProcessorContext(Protocol):
    """What a processor can do besides computing: forward, use stores, schedule, read metadata."""

    def forward(self, key: Any, value: Any) -> None:
        """Send a record to the processor's children (the steps after ``process``)."""

    def store(self, name: str) -> StateStore: ...

    def schedule(self, interval: int | timedelta, kind: PunctuationType, callback: Any) -> Cancellable:
        """Call ``callback(timestamp_ms)`` every ``interval`` of stream time or wall-clock time."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def timestamp(self) -> int:
        """The current record's timestamp (during a punctuation: the punctuation's time)."""

    @property
    def stream_time(self) -> int:
        """The largest record timestamp this task has processed."""


class Processor:
    """Subclass it and override ``process`` (and ``init`` for stores and punctuators).

    One instance per task, made by the factory given to ``stream.process`` (a class works).
    """

    context: ProcessorContext

    def init(self, context: ProcessorContext) -> None:
        self.context = context

    def process(self, key: Any, value: Any) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """The task is closing (revoked, or the worker stops)."""
