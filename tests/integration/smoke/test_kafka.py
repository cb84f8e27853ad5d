"""The real broker honours transactions: an aborted write is invisible to read_committed."""

from __future__ import annotations

import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

pytestmark = pytest.mark.integration


def _read_all(bootstrap: str, topic: str, isolation: str) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"smoke-{uuid.uuid4().hex}",
            "isolation.level": isolation,
            "enable.auto.commit": False,
        }
    )
    try:
        tp = TopicPartition(topic, 0, 0)
        consumer.assign([tp])
        low, high = consumer.get_watermark_offsets(tp, timeout=10)
        seen: list[bytes] = []
        position = low
        while position < high:
            msg = consumer.poll(5)
            if msg is None:
                # under read_committed the consumer stops at the last stable offset; aborted
                # records and control markers are skipped, so the position may never reach high
                break
            assert msg.error() is None, msg.error()
            value, offset = msg.value(), msg.offset()
            assert value is not None and offset is not None
            seen.append(value)
            position = offset + 1
        return seen
    finally:
        consumer.close()


def test_aborted_transaction_is_invisible_to_read_committed(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    topic = new_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "transactional.id": f"smoke-{topic}"})
    producer.init_transactions(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed-1", partition=0)
    producer.commit_transaction(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"aborted", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)

    producer.begin_transaction()
    producer.produce(topic, key=b"k", value=b"committed-2", partition=0)
    producer.commit_transaction(30)

    assert _read_all(kafka_bootstrap, topic, "read_committed") == [b"committed-1", b"committed-2"]
    # the aborted record is physically in the log: read_uncommitted sees it
    assert b"aborted" in _read_all(kafka_bootstrap, topic, "read_uncommitted")
