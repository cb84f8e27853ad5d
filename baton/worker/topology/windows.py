"""Windows on record timestamps (event time), as in Kafka Streams' ``TimeWindows``, ``SessionWindows``
and ``SlidingWindows``.

Time windows are aligned to the epoch, so which windows a record falls in depends only
on its timestamp: replaying the same input gives the same windows, whatever the wall
clock. Every window has a **grace period** and a **retention**, measured in *stream
time* (the largest record timestamp an aggregation has seen, never the wall clock):

* a window *closes* when stream time reaches its end plus the grace period; a record
  that would fall only in closed windows is late and dropped (Kafka Streams' rule), so a
  late record never reopens an old window;
* a window is *deleted* from the store and its changelog when stream time reaches its
  start plus the retention (at least size + grace; by default exactly that, so a window
  is gone as soon as it closes). Without this a window store grows without bound.

The default grace is 24 hours, Kafka Streams' default before it asked for one
explicitly: old topologies keep accepting records up to a day out of order.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from datetime import timedelta
from typing import Generic, TypeVar

from baton.worker.topology.serdes import Serde, SerdeError

K = TypeVar("K")

_START = struct.Struct(">q")
_END_START = struct.Struct(">qq")


DEFAULT_GRACE_MS = 24 * 3600 * 1000


def _ms(value: int | timedelta) -> int:
    return int(value.total_seconds() * 1000) if isinstance(value, timedelta) else int(value)


def _retention(retention: int | timedelta | None, minimum: int, what: str) -> int:
    if retention is None:
        return minimum
    ms = _ms(retention)
    if ms < minimum:
        raise ValueError(
            f"retention {ms} ms is shorter than {what} ({minimum} ms): windows would vanish open"
        )
    return ms


@dataclass(frozen=True)
class TimeWindows:
    """Fixed-size windows of ``size_ms`` starting every ``advance_ms`` (tumbling when equal)."""

    size_ms: int
    advance_ms: int
    grace_ms: int = DEFAULT_GRACE_MS
    retention_ms: int = 0  # 0: size + grace

    def __post_init__(self) -> None:
        if self.size_ms <= 0 or self.advance_ms <= 0:
            raise ValueError("window size and advance must be positive")
        if self.advance_ms > self.size_ms:
            raise ValueError("advance larger than size would leave gaps between windows")
        if self.grace_ms < 0:
            raise ValueError("the grace period cannot be negative")
        minimum = self.size_ms + self.grace_ms
        object.__setattr__(
            self, "retention_ms", _retention(self.retention_ms or None, minimum, "size + grace")
        )

    def close_at(self, start: int) -> int:
        """Stream time at which the window starting at ``start`` closes."""
        return start + self.size_ms + self.grace_ms

    def expire_at(self, start: int) -> int:
        """Stream time at which the window starting at ``start`` leaves the store."""
        return start + self.retention_ms

    def starts_for(self, timestamp_ms: int) -> list[int]:
        """Start times of every window containing ``timestamp_ms``, oldest first."""
        # window starts are multiples of advance; [s, s+size) contains t iff t-size < s <= t
        last = timestamp_ms - timestamp_ms % self.advance_ms
        lowest = timestamp_ms - self.size_ms + 1
        first = max(0, -(-lowest // self.advance_ms) * self.advance_ms)
        return list(range(first, last + 1, self.advance_ms))


def tumbling(
    size: int | timedelta,
    *,
    grace: int | timedelta = DEFAULT_GRACE_MS,
    retention: int | timedelta | None = None,
) -> TimeWindows:
    """Non-overlapping windows; durations in milliseconds or as ``timedelta``."""
    ms = _ms(size)
    return TimeWindows(ms, ms, _ms(grace), 0 if retention is None else _ms(retention))


def hopping(
    size: int | timedelta,
    advance: int | timedelta,
    *,
    grace: int | timedelta = DEFAULT_GRACE_MS,
    retention: int | timedelta | None = None,
) -> TimeWindows:
    """Overlapping windows of ``size`` starting every ``advance``."""
    return TimeWindows(_ms(size), _ms(advance), _ms(grace), 0 if retention is None else _ms(retention))


@dataclass(frozen=True)
class SessionWindows:
    """Per-key sessions: records less than ``gap_ms`` apart (inclusive) belong to one session.

    A session ``[start, end]`` spans its first and last record (``end`` is inclusive, as in
    Kafka Streams). It closes when stream time reaches ``end + gap + grace``: no record in
    its grace period can extend it after that. A closed session never changes; a record
    that is not late itself but lands within the gap of a closed session starts a new one.
    """

    gap_ms: int
    grace_ms: int = DEFAULT_GRACE_MS
    retention_ms: int = 0  # 0: gap + grace

    def __post_init__(self) -> None:
        if self.gap_ms <= 0:
            raise ValueError("the inactivity gap must be positive")
        if self.grace_ms < 0:
            raise ValueError("the grace period cannot be negative")
        minimum = self.gap_ms + self.grace_ms
        object.__setattr__(
            self, "retention_ms", _retention(self.retention_ms or None, minimum, "gap + grace")
        )

    def close_at(self, end: int) -> int:
        return end + self.gap_ms + self.grace_ms

    def expire_at(self, end: int) -> int:
        return end + self.retention_ms


def sessions(
    gap: int | timedelta,
    *,
    grace: int | timedelta = DEFAULT_GRACE_MS,
    retention: int | timedelta | None = None,
) -> SessionWindows:
    """Session windows with an inactivity ``gap``."""
    return SessionWindows(_ms(gap), _ms(grace), 0 if retention is None else _ms(retention))


@dataclass(frozen=True)
class SlidingWindows:
    """Windows of ``difference_ms`` that slide with the records (Kafka Streams' ``SlidingWindows``, KIP-450).

    Two records of a key are in one window when their timestamps are at most
    ``difference_ms`` apart. The windows are the distinct sets of records that can be
    seen that way: each record ``t`` has its *left* window ``[t - difference, t]``, and a
    *right* window ``[t + 1, t + 1 + difference]`` when a later record falls in it. Both
    ends are inclusive. A window closes when stream time passes its end plus the grace
    period, and leaves the store after ``retention`` (at least difference + grace + 1).
    """

    difference_ms: int
    grace_ms: int = DEFAULT_GRACE_MS
    retention_ms: int = 0  # 0: difference + grace + 1

    def __post_init__(self) -> None:
        if self.difference_ms <= 0:
            raise ValueError("the time difference must be positive")
        if self.grace_ms < 0:
            raise ValueError("the grace period cannot be negative")
        minimum = self.difference_ms + self.grace_ms + 1
        object.__setattr__(
            self, "retention_ms", _retention(self.retention_ms or None, minimum, "difference + grace + 1")
        )

    def close_at(self, start: int) -> int:
        """Stream time at which ``[start, start + difference]`` closes (its end is inclusive)."""
        return start + self.difference_ms + self.grace_ms + 1

    def expire_at(self, start: int) -> int:
        return start + self.retention_ms


def sliding(
    difference: int | timedelta,
    *,
    grace: int | timedelta = DEFAULT_GRACE_MS,
    retention: int | timedelta | None = None,
) -> SlidingWindows:
    """Sliding windows: records at most ``difference`` apart are aggregated together."""
    return SlidingWindows(_ms(difference), _ms(grace), 0 if retention is None else _ms(retention))


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


class SessionWindowedSerde(Serde[Windowed[K]]):
    """Inner key bytes, then the 8-byte end and the 8-byte start, big-endian.

    Kafka Streams' ``SessionWindowedSerializer`` layout, so JVM consumers read it as theirs.
    """

    def __init__(self, inner: Serde[K]) -> None:
        self.inner = inner

    def serialize(self, value: Windowed[K]) -> bytes:
        return self.inner.serialize(value.key) + _END_START.pack(value.end, value.start)

    def deserialize(self, data: bytes) -> Windowed[K]:
        if len(data) < _END_START.size:
            raise SerdeError("session key shorter than its 16-byte end and start")
        end, start = _END_START.unpack(data[-_END_START.size :])
        return Windowed(self.inner.deserialize(data[: -_END_START.size]), start, end)


@dataclass(frozen=True)
class JoinWindows:
    """How far apart in time two records of a stream-stream join may be (Kafka Streams' ``JoinWindows``).

    A left record at ``t`` joins right records in ``[t - before_ms, t + after_ms]``. Records
    wait in the join's stores until stream time passes their window plus the grace
    period; a left (or outer) join emits a record that never found a partner only then,
    once, with ``None`` for the other side, so no result is later contradicted.
    """

    before_ms: int
    after_ms: int
    grace_ms: int = DEFAULT_GRACE_MS

    def __post_init__(self) -> None:
        if self.before_ms < 0 or self.after_ms < 0 or self.grace_ms < 0:
            raise ValueError("join window bounds and grace cannot be negative")


def within(
    difference: int | timedelta,
    *,
    after: int | timedelta | None = None,
    grace: int | timedelta = DEFAULT_GRACE_MS,
) -> JoinWindows:
    """Records at most ``difference`` apart join (``after`` makes the window asymmetric)."""
    before = _ms(difference)
    return JoinWindows(before, before if after is None else _ms(after), _ms(grace))
