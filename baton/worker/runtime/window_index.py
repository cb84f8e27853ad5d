"""Which windows of one store close and expire as stream time moves (pure, no I/O).

A windowed aggregation must find, each time stream time advances, the windows that just
closed (to emit their final result under ``suppress``) and the ones past retention (to
delete them from the store and its changelog). Scanning the store for that on every
record would cost a RocksDB iteration per record, so the aggregation keeps this index:
two heaps ordered by close time and expiry time, with lazy deletion (a session merged
away is dropped from ``_live`` and its heap entries are skipped when they surface). It
is rebuilt from the store when a task starts (``load``), so it needs no changelog of
its own.
"""

from __future__ import annotations

import heapq
from typing import Any


class WindowIndex:
    """Live windows of one task's store, by serialized window key."""

    __slots__ = ("_closed", "_closing", "_expiring", "_live")

    def __init__(self) -> None:
        # window key bytes -> (close_at, expire_at, window key object)
        self._live: dict[bytes, tuple[int, int, Any]] = {}
        self._closed: set[bytes] = set()
        self._closing: list[tuple[int, bytes]] = []
        self._expiring: list[tuple[int, bytes]] = []

    def __contains__(self, window: bytes) -> bool:
        return window in self._live

    def __len__(self) -> int:
        return len(self._live)

    def is_closed(self, window: bytes) -> bool:
        return window in self._closed

    def window(self, window: bytes) -> Any:
        """The key object a live window was added with (``None`` for one not tracked)."""
        entry = self._live.get(window)
        return None if entry is None else entry[2]

    def add(self, window: bytes, key: Any, close_at: int, expire_at: int) -> None:
        """Track a window (a no-op if it is tracked already: a window's times never change)."""
        if window in self._live:
            return
        self._live[window] = (close_at, expire_at, key)
        heapq.heappush(self._closing, (close_at, window))
        heapq.heappush(self._expiring, (expire_at, window))

    def remove(self, window: bytes) -> None:
        """Forget a window (a session merged into a larger one)."""
        self._live.pop(window, None)
        self._closed.discard(window)

    def pop_closed(self, stream_time: int) -> list[tuple[bytes, Any]]:
        """Windows that closed at or before ``stream_time`` and were not reported yet, oldest first."""
        out: list[tuple[bytes, Any]] = []
        heap, live = self._closing, self._live
        while heap and heap[0][0] <= stream_time:
            close_at, window = heapq.heappop(heap)
            entry = live.get(window)
            if entry is None or entry[0] != close_at or window in self._closed:
                continue  # removed, or re-added after a removal (its new entry is elsewhere in the heap)
            self._closed.add(window)
            out.append((window, entry[2]))
        return out

    def pop_expired(self, stream_time: int) -> list[tuple[bytes, Any]]:
        """Windows past retention at ``stream_time``; they are forgotten as they are returned."""
        out: list[tuple[bytes, Any]] = []
        heap, live = self._expiring, self._live
        while heap and heap[0][0] <= stream_time:
            expire_at, window = heapq.heappop(heap)
            entry = live.get(window)
            if entry is None or entry[1] != expire_at:
                continue
            del live[window]
            self._closed.discard(window)
            out.append((window, entry[2]))
        return out
