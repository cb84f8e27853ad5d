"""Per-task record context and the sink interfaces processors write through."""

from __future__ import annotations

from typing import Protocol, TypeAlias


class RecordContext:
    """Metadata of the record being processed, shared by a task's processors.

    The sink gate of blue-green deploys decides on ``topic/partition/offset``, the record's
    own, whose offsets mean the same in both colors. That holds for records read back from a
    repartition topic too: they once carried their input record's position (the *origin*) in
    a header, but a topology that repartitions refuses every flip (``topology/splice.py``:
    each color's repartition topic orders records its own way), so no gate ever has a cut for
    them to meet, and the header cost ~7 % of such a topology's processing thread (writing it,
    and librdkafka parsing it on every consumed record: docs/benchmarks.md, "Measured design
    choices": no-origin-header).
    """

    __slots__ = ("offset", "partition", "timestamp", "topic")

    def __init__(self) -> None:
        self.topic = ""
        self.partition = -1
        self.offset = -1
        self.timestamp = 0


# the header shape confluent-kafka takes and gives
Headers: TypeAlias = list[tuple[str, str | bytes | None]]


class Send(Protocol):
    """Produce one record (the runtime's producer, inside the transaction under EOS)."""

    def __call__(  # noqa: PLR0917 - the hot path: positional is measurably faster
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: int,
        headers: Headers | None,
    ) -> None: ...


class SinkGate(Protocol):
    """Decides whether a sink record may be emitted, from the input record's position.

    Blue-green deploys install a gate per color that opens and closes at the agreed cut
    offsets; changelog and repartition writes never pass through it (state must stay hot
    in the silent color).
    """

    def allows(self, topic: str, partition: int, offset: int) -> bool: ...


class OpenGate:
    """The gate of a single deployment: everything is emitted."""

    def allows(self, topic: str, partition: int, offset: int) -> bool:
        return True
