"""Dead-letter records: the failed input, unchanged, with headers saying where it came from and why."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from baton.worker.config import ErrorHandler
from baton.worker.runtime.metrics import Metrics
from baton.worker.runtime.producer import OutputRecordRefused
from baton.worker.runtime.record import Message
from baton.worker.topology.context import Headers, Send

log = logging.getLogger("baton.worker")

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


@dataclass
class DeadLetters:
    """Where a task sends a record it cannot deserialize, process or produce.

    Under the ``dlq`` handler the record goes, unchanged, to the dead-letter topic in the
    same transaction as the task's other outputs, so it is committed exactly when its
    offset is. Under ``fail``, or when the dead-letter topic refuses it too, the worker
    stops without committing: a record is never dropped."""

    handler: ErrorHandler
    topic: str
    send: Send  # the worker's ``Output.send``, or the test driver's topics
    metrics: Metrics

    def __call__(self, error: BaseException, stage: str, msg: Message) -> None:
        topic, partition, offset = msg.topic() or "", msg.partition() or 0, msg.offset() or 0
        if self.handler is ErrorHandler.FAIL:
            raise RecordFailed(f"{stage} failed at {topic}[{partition}]@{offset}: {error}") from error
        log.warning(
            "record sent to the DLQ",
            extra={
                "task_topic": topic,
                "partition": partition,
                "offset": offset,
                "stage": stage,
                "error": f"{type(error).__name__}: {error}",
            },
        )
        try:
            self.send(
                self.topic,
                msg.key(),
                msg.value(),
                None,
                msg.timestamp()[1],
                dlq_headers(topic, partition, offset, stage, error),
            )
        except OutputRecordRefused as refused:  # nowhere left to put it: stop rather than drop it
            raise RecordFailed(
                f"{stage} failed at {topic}[{partition}]@{offset} ({error}) and the dead-letter "
                f"topic refused the record too: {refused}"
            ) from refused
        self.metrics.dlq.labels(stage).inc()
