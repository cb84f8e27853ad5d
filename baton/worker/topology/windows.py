"""Time windows on record timestamps (event time), as in Kafka Streams' ``TimeWindows``.

Windows are aligned to the epoch, so which windows a record falls in depends only on
its timestamp: replaying the same input gives the same windows, whatever the wall clock.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import timedelta
from typing import Generic, TypeVar

from baton.worker.topology.serdes import Serde, SerdeError

K = TypeVar("K")

_START = struct.Struct(">q")


def _ms(value: int | timedelta) -> int:
    return int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


@dataclass(frozen=True)
class TimeWindows:
    """Fixed-size windows of ``size_ms`` starting every ``advance_ms`` (tumbling when equal)."""

    size_ms: int
    advance_ms: int

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.advance_ms <= 0:
            raise ValueError("window size and advance must be positive")
        if self.advance_ms > self.size_ms:
            raise ValueError("advance larger than size would leave gaps between windows")

    def starts_for(self, timestamp_ms: int) -> list[int]:
        """Start times of every window containing ``timestamp_ms``, oldest first."""
        # window starts are multiples of advance; [s, s+size) contains t iff t-size < s <= t
        last = timestamp_ms - timestamp_ms % self.advance_ms
        lowest = timestamp_ms - self.size_ms + 1
        first = max(0, -(-lowest // self.advance_ms) * self.advance_ms)
        return list(range(first, last + 1, self.advance_ms))


def tumbling(size: int | timedelta) -> TimeWindows:
    """Non-overlapping windows; ``size`` in milliseconds or a ``timedelta``."""
    ms = _ms(size)
    return TimeWindows(ms, ms)


def hopping(size: int | timedelta, advance: int | timedelta) -> TimeWindows:
    """Overlapping windows of ``size`` starting every ``advance``."""
    return TimeWindows(_ms(size), _ms(advance))


@dataclass(frozen=True, slots=True)
class Windowed(Generic[K]):
    """A key within one window: the key type of windowed aggregations."""

    key: K
    start: int
    end: int


class WindowedSerde(Serde[Windowed[K]]):
    """Inner key bytes followed by the 8-byte big-endian window start.

    This is the layout of Kafka Streams' ``TimeWindowedSerializer``, so JVM consumers can
    read Baton's windowed output; the end is recomputed from the window size.
    """

    def __init__(self, inner: Serde[K], size_ms: int) -> None:
        self.inner = inner
        self.size_ms = size_ms

    def serialize(self, value: Windowed[K]) -> bytes:
        return self.inner.serialize(value.key) + _START.pack(value.start)

    def deserialize(self, data: bytes) -> Windowed[K]:
        if len(data) < _START.size:
            raise SerdeError("windowed key shorter than its 8-byte window start")
        (start,) = _START.unpack(data[-_START.size :])
        return Windowed(self.inner.deserialize(data[: -_START.size]), start, start + self.size_ms)
