"""What a task reads: the ``Message`` protocol, and ``Record``, a consumed record made by hand.

The task reads records through the ``Message`` protocol (``confluent_kafka.Message``
fits). Whoever runs a task on records that no consumer fetched (the compactor's replay,
the test driver, a failed cache flush standing in for its input, unit tests) builds a
``Record``, so there is one stand-in to keep in line with the protocol, not one per caller,
and it sits next to the protocol it follows.
"""

from __future__ import annotations

from typing import Any, Protocol


class Message(Protocol):
    """What the task reads from a consumed record (``confluent_kafka.Message`` fits)."""

    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def timestamp(self) -> tuple[int, int]: ...
    def headers(self) -> Any: ...
    def error(self) -> Any: ...


class Record:
    """One record of ``topic``/``partition`` at ``offset``: ``confluent_kafka.Message``'s readers."""

    __slots__ = ("_h", "_k", "_o", "_p", "_t", "_ts", "_v")

    def __init__(  # noqa: PLR0917 - mirrors a Kafka record
        self,
        topic: str,
        partition: int,
        offset: int,
        timestamp: int,
        key: bytes | None,
        value: bytes | None,
        headers: Any = None,
    ) -> None:
        self._t, self._p, self._o, self._ts = topic, partition, offset, timestamp
        self._k, self._v, self._h = key, value, headers

    def topic(self) -> str | None:
        return self._t

    def partition(self) -> int | None:
        return self._p

    def offset(self) -> int | None:
        return self._o

    def key(self) -> bytes | None:
        return self._k

    def value(self) -> bytes | None:
        return self._v

    def timestamp(self) -> tuple[int, int]:
        """(type, ms): type 1 is CreateTime, what a producer-stamped record carries."""
        return (1, self._ts)

    def headers(self) -> Any:
        return self._h

    def error(self) -> None:
        return None
