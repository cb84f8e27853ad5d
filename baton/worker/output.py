"""The process's producer: one per worker, transactional under exactly-once.

It tracks, from delivery reports, the highest offset written to each changelog
partition since the last commit: those offsets become the stores' checkpoints once the
commit succeeds (see ``commit.py``).
"""

from __future__ import annotations

import logging
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from baton.worker.context import Headers

log = logging.getLogger(__name__)


class DeliveryFailed(Exception):
    """A record could not be written; uncommitted work must be redone."""


class Output:
    def __init__(self, config: dict[str, Any], changelog_topics: set[str]) -> None:
        self._config = dict(config)
        self._changelogs = changelog_topics
        self.changelog_offsets: dict[tuple[str, int], int] = {}
        self.errors: list[KafkaError] = []
        self.sent = 0
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        config = dict(self._config)
        config["on_delivery"] = self._delivered
        return Producer(config)

    def recreate(self) -> None:
        """After a fatal error (e.g. fenced): a fresh producer, same transactional.id."""
        try:
            self.producer.flush(0)
        except Exception:  # a fenced producer may refuse anything; it is dropped either way
            log.debug("flush of dropped producer failed", exc_info=True)
        self.changelog_offsets.clear()
        self.errors.clear()
        self.producer = self._new_producer()

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
            return
        topic = msg.topic()
        if topic in self._changelogs:
            partition, offset = msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None
            tp = (topic, partition)
            if offset > self.changelog_offsets.get(tp, -1):
                self.changelog_offsets[tp] = offset

    def send(  # noqa: PLR0917 - matches context.Send, the hot path
        self, topic: str, key: bytes | None, value: bytes | None, partition: int | None, timestamp: int,
             headers: Headers | None) -> None:
        producer = self.producer
        while True:
            try:
                if partition is None:
                    producer.produce(topic, value, key, timestamp=timestamp, headers=headers)
                else:
                    producer.produce(topic, value, key, partition=partition, timestamp=timestamp, headers=headers)
                break
            except BufferError:  # local queue full: let librdkafka drain it
                producer.poll(0.05)
        self.sent += 1

    def flush(self, timeout: float = 60.0) -> None:
        """Wait for every delivery report; raise if any record failed."""
        remaining = self.producer.flush(timeout)
        if remaining:
            raise DeliveryFailed(f"{remaining} records not delivered within {timeout}s")
        if self.errors:
            first = self.errors[0]
            self.errors.clear()
            raise DeliveryFailed(f"delivery failed: {first}")

    def take_checkpoints(self) -> dict[tuple[str, int], int]:
        """Changelog checkpoints (next offset) of everything delivered since the last call."""
        out = {tp: offset + 1 for tp, offset in self.changelog_offsets.items()}
        self.changelog_offsets.clear()
        return out
