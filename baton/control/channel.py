"""Kafka I/O of the control topic: create it, tail it, write to it.

Everything here is a thin shell around :mod:`.messages`, :mod:`.gate` and :mod:`.flipper`.
Control records are read ``read_committed`` so that a worker's Drained record, written in
the transaction that carries its last output below the cut, is seen only with that output.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Iterator

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from .messages import BadControlRecord, Message, decode

log = logging.getLogger("baton.control")

CONTROL_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.compaction.lag.ms": "0",
    "segment.ms": "600000",
    "retention.ms": "-1",
}


def control_topic(application_id: str) -> str:
    """``<applicationId>-control``: the base id, shared by both colors."""
    return f"{application_id}-control"


def ensure_control_topic(bootstrap: str, topic: str, extra: dict[str, str] | None = None) -> bool:
    """Create the compacted one-partition control topic if absent; True if it was created."""
    admin = AdminClient({"bootstrap.servers": bootstrap, **(extra or {})})
    if topic in admin.list_topics(timeout=10).topics:
        return False
    fut = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=-1, config=CONTROL_TOPIC_CONFIG)]
    )
    try:
        fut[topic].result(30)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        return False
    return True


class ControlReader:
    """Tails the control topic from its beginning; ``poll`` yields decoded messages in order."""

    def __init__(self, bootstrap: str, topic: str, extra: dict[str, str] | None = None) -> None:
        self.topic = topic
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                # never committed (assign() only), but librdkafka finds its coordinator, which
                # under ACLs needs Describe on the group: named under the app's own prefix,
                # which the app's principal holds (docs/security.md)
                "group.id": f"{topic}-reader-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                **(extra or {}),
            }
        )
        self._consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        self.caught_up = False

    def poll(self, timeout: float = 0.1, max_records: int = 500) -> Iterator[Message]:
        for msg in self._consumer.consume(max_records, timeout):
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    self.caught_up = True
                    continue
                raise KafkaException(err)
            value = msg.value()
            if value is None:
                continue  # a tombstone of a finished flip's record
            try:
                yield decode(value)
            except BadControlRecord as exc:
                log.warning("skipping control record", extra={"offset": msg.offset(), "error": str(exc)})

    def read_to_end(self, timeout: float = 30.0) -> list[Message]:
        """Everything currently in the topic (used at start-up and by the coordinator)."""
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while not self.caught_up:
            if time.monotonic() > deadline:
                raise TimeoutError(f"control topic {self.topic}: not read to its end within {timeout}s")
            out.extend(self.poll(0.2))
        return out

    def catch_up(self, timeout: float = 10.0) -> list[Message]:
        """Everything written up to now, read before this returns.

        A worker calls it before it processes a partition it was just given: a flip may have
        been prepared (or decided) while the partition's previous owner was paused for it, and
        the new owner must not emit past the reported position before it has seen that.
        """
        tp = TopicPartition(self.topic, 0)
        _low, high = self._consumer.get_watermark_offsets(tp, timeout=timeout, cached=False)
        out: list[Message] = []
        deadline = time.monotonic() + timeout
        while True:
            position = self._consumer.position([tp])[0].offset
            if high <= 0 or position >= high:  # librdkafka steps past transaction markers
                return out
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"control topic {self.topic}: not read up to offset {high} within {timeout}s"
                )
            out.extend(self.poll(0.05))

    def close(self) -> None:
        self._consumer.close()


class ControlWriter:
    """A transactional producer for the coordinator: a second coordinator fences the first."""

    def __init__(
        self, bootstrap: str, topic: str, transactional_id: str, extra: dict[str, str] | None = None
    ) -> None:
        self.topic = topic
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": transactional_id,
                "transaction.timeout.ms": 60_000,
                **(extra or {}),
            }
        )
        self._producer.init_transactions(30)

    def write(self, *records: tuple[bytes, bytes | None]) -> None:
        """Write (key, value) records atomically."""
        self._producer.begin_transaction()
        for key, value in records:
            self._producer.produce(self.topic, value=value, key=key, partition=0)
        self._producer.commit_transaction(30)

    def close(self) -> None:
        self._producer.flush(10)


def write_once(
    bootstrap: str, topic: str, record: tuple[bytes, bytes], extra: dict[str, str] | None = None
) -> None:
    """One record outside any flip (the operator's drain marks): idempotent, not transactional,
    so it never fences the flip coordinator's transactional producer. Raises unless delivered."""
    key, value = record
    errors: list[object] = []
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, **(extra or {})})
    producer.produce(
        topic, value=value, key=key, partition=0, on_delivery=lambda err, _msg: errors.append(err)
    )
    left = producer.flush(10)
    if left or not errors or errors[0] is not None:
        raise RuntimeError(
            f"control record {key!r} not delivered to {topic}: {errors[0] if errors else 'timed out'}"
        )
