"""Kafka topic ids: what tells a topic from one deleted and recreated under the same name.

Snapshots of a changelog record the id of the topic they were taken of (the compactor
writes it, workers check it), so both ask the broker the same way.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import TopicCollection


def topic_ids(admin: Any, topics: list[str], timeout: float = 15.0) -> dict[str, str]:
    """Topic name -> its id, as Kafka prints it (base64); raises if a topic cannot be described."""
    if not topics:
        return {}
    futures = admin.describe_topics(TopicCollection(sorted(set(topics))), request_timeout=timeout)
    return {name: str(future.result(timeout * 2).topic_id) for name, future in futures.items()}


def existing_topic_ids(admin: Any, topics: list[str], timeout: float = 15.0) -> dict[str, str]:
    """As :func:`topic_ids`, leaving out topics the broker does not know (deleted, or never made)."""
    from confluent_kafka import KafkaError, KafkaException

    if not topics:
        return {}
    futures = admin.describe_topics(TopicCollection(sorted(set(topics))), request_timeout=timeout)
    out = {}
    for name, future in futures.items():
        try:
            out[name] = str(future.result(timeout * 2).topic_id)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise
    return out
