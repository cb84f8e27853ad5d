"""Dead-letter records: the failed input, unchanged, with headers saying where it came from and why."""

from __future__ import annotations

from baton.worker.context import Headers

HEADER_TOPIC = "baton.source.topic"
HEADER_PARTITION = "baton.source.partition"
HEADER_OFFSET = "baton.source.offset"
HEADER_ERROR = "baton.error"
HEADER_STAGE = "baton.error.stage"  # "deserialize", "process" or "produce" (the broker refused the output)

_MAX_ERROR = 2000


class RecordFailed(Exception):
    """Raised under the ``fail`` handler: the worker stops without committing the bad record."""


def dlq_headers(topic: str, partition: int, offset: int, stage: str, error: BaseException) -> Headers:
    text = f"{type(error).__name__}: {error}"[:_MAX_ERROR]
    return [
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        (HEADER_STAGE, stage.encode()),
        (HEADER_ERROR, text.encode()),
    ]
