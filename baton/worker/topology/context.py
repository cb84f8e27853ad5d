"""Per-task record context and the sink interfaces processors write through."""

from __future__ import annotations

from typing import Protocol, TypeAlias


class RecordContext:
    """Metadata of the record being processed, shared by a task's processors.

    ``origin_*`` is the record the sink gate of blue-green deploys decides on: the record
    itself, ``topic/partition/offset``. Records read back from a repartition topic are their
    own origin too. They once carried their input record's in a header, but a topology that
    repartitions refuses every flip (``topology/splice.py``: each color's repartition topic
    orders records its own way), so no gate ever has a cut for them to meet, and the header
    cost ~7 % of such a topology's processing thread (writing it, and librdkafka parsing it on
    every consumed record). The fields stay apart from ``topic/partition/offset`` so that a
    store's flush and a gate read one shape everywhere.
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
