"""Per-task record context and the sink interfaces processors write through."""

from __future__ import annotations

from typing import Protocol, TypeAlias


class RecordContext:
    """Metadata of the record being processed, shared by a task's processors.

    ``origin_*`` name the external source record a record descends from: the same as
    ``topic/partition/offset`` for records read from the application's input topics, and
    carried in headers across repartition topics (see ``ORIGIN_HEADER``). The sink gate of
    blue-green deploys decides on the origin, whose offsets mean the same in both colors.
    """

    __slots__ = (
        "offset",
        "origin_offset",
        "origin_partition",
        "origin_topic",
        "partition",
        "timestamp",
        "topic",
    )

    def __init__(self) -> None:
        self.topic = ""
        self.partition = -1
        self.offset = -1
        self.timestamp = 0
        self.origin_topic = ""
        self.origin_partition = -1
        self.origin_offset = -1


ORIGIN_HEADER = "baton.origin"

# the header shape confluent-kafka takes and gives
Headers: TypeAlias = list[tuple[str, str | bytes | None]]


def encode_origin(topic: str, partition: int, offset: int) -> bytes:
    return f"{partition}:{offset}:{topic}".encode()


def decode_origin(raw: bytes) -> tuple[str, int, int]:
    partition, offset, topic = raw.decode().split(":", 2)
    return topic, int(partition), int(offset)


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
    """Decides whether a sink record may be emitted, from the origin of the input record.

    Blue-green deploys install a gate per color that opens and closes at the agreed cut
    offsets; changelog and repartition writes never pass through it (state must stay hot
    in the silent color).
    """

    def allows(self, origin_topic: str, origin_partition: int, origin_offset: int) -> bool: ...


class OpenGate:
    """The gate of a single deployment: everything is emitted."""

    def allows(self, origin_topic: str, origin_partition: int, origin_offset: int) -> bool:
        return True
