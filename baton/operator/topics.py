"""The operator's Kafka side: internal topics and consumer lag, through the AdminClient.

The operator creates the control topic (the flip protocol needs it before any worker
coordinates), deletes an app's internal topics when its deletionPolicy says so, and reads
each color's lag for status. Changelog topics are created by the workers, which know the
topology's stores and partition counts.

Every call has a short timeout: Kafka being unreachable must not block reconciliation of
the Kubernetes objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import (
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec  # type: ignore[attr-defined]

from baton import group_offsets
from baton.control.messages import COLORS
from baton.operator.core.spec import StreamApp

TIMEOUT_S = 5.0

# The control topic carries the flip protocol's records: compacted so that the latest state
# per key survives, one partition so that every reader sees one order.
CONTROL_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "600000",
}


class KafkaUnavailableError(RuntimeError):
    """Kafka could not be reached or refused the request (the caller retries later)."""


def admin_config(app: StreamApp, kafka_settings: Mapping[str, str]) -> dict[str, Any]:
    """librdkafka settings for the operator's AdminClient: the app's connection settings
    (``kafka_access.operator_settings``, from its Secrets) with the operator's timeouts."""
    return {
        "bootstrap.servers": app.spec.kafka.bootstrap_servers,
        "socket.timeout.ms": int(TIMEOUT_S * 1000),
        "client.id": "baton-operator",
        **kafka_settings,
    }


def _result(future: Any, what: str) -> Any:
    try:
        return future.result(timeout=TIMEOUT_S * 2)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"{what}: {exc.args[0]}") from exc
    except TimeoutError as exc:
        raise KafkaUnavailableError(f"{what}: timed out after {TIMEOUT_S * 2:.0f}s") from exc


def ensure_control_topic(admin: AdminClient, topic: str, replication_factor: int = -1) -> bool:
    """Create the control topic if missing; True if this call created it."""
    futures = admin.create_topics(
        [
            NewTopic(
                topic, num_partitions=1, replication_factor=replication_factor, config=CONTROL_TOPIC_CONFIG
            )
        ],
        request_timeout=TIMEOUT_S,
    )
    try:
        futures[topic].result(timeout=TIMEOUT_S * 2)
    except KafkaException as exc:
        if exc.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:
            return False
        raise KafkaUnavailableError(f"creating {topic}: {exc.args[0]}") from exc
    except TimeoutError as exc:
        raise KafkaUnavailableError(f"creating {topic}: timed out") from exc
    return True


def internal_topic_pattern(application_id: str) -> re.Pattern[str]:
    """Names of an app's internal topics: control, and per color changelogs and repartitions.

    Dead-letter topics are not internal: they hold records a person still has to look at.
    """
    app = re.escape(application_id)
    colors = "|".join(COLORS)
    return re.compile(rf"^{app}-control$|^{app}-(?:{colors})(?:-g[0-9]+)?-.+-(?:changelog|repartition)$")


def internal_topics(admin: AdminClient, application_id: str) -> list[str]:
    try:
        metadata = admin.list_topics(timeout=TIMEOUT_S)
    except KafkaException as exc:
        raise KafkaUnavailableError(f"listing topics: {exc.args[0]}") from exc
    pattern = internal_topic_pattern(application_id)
    return sorted(t for t in metadata.topics if pattern.match(t))


def delete_internal_topics(admin: AdminClient, application_id: str) -> list[str]:
    """Delete the app's internal topics; returns their names."""
    topics = internal_topics(admin, application_id)
    if not topics:
        return []
    futures = admin.delete_topics(topics, operation_timeout=TIMEOUT_S, request_timeout=TIMEOUT_S)
    for topic, future in futures.items():
        try:
            future.result(timeout=TIMEOUT_S * 2)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise KafkaUnavailableError(f"deleting {topic}: {exc.args[0]}") from exc
    return topics


def consumer_lag(admin: AdminClient, group: str) -> int | None:
    """Records the group has not committed yet, over all its partitions; None without commits.

    End offsets are read with read_committed isolation (the last stable offset), so
    transaction markers of exactly-once producers do not count as lag. Offsets are read
    through :mod:`baton.group_offsets`, which keeps librdkafka from crashing the operator
    on a broker whose group coordinator is not ready.
    """
    return lag_of(partition_offsets(admin, group))


def lag_of(offsets: Mapping[tuple[str, int], tuple[int, int]] | None) -> int | None:
    """The lag of :func:`partition_offsets`' reading (None without commits)."""
    return None if not offsets else sum(max(0, end - committed) for committed, end in offsets.values())


def partition_offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], tuple[int, int]] | None:
    """(committed, end) per partition the group has committed; None without commits (see
    :func:`consumer_lag`; the autoscaler derives rates from two readings)."""
    try:
        committed = group_offsets.committed_offsets(admin, group, timeout=TIMEOUT_S)
    except (KafkaException, TimeoutError) as exc:
        raise KafkaUnavailableError(
            f"offsets of {group}: {exc.args[0] if exc.args else 'timed out'}"
        ) from exc
    positions = {(tp.topic, tp.partition): tp.offset for tp in committed or [] if tp.offset >= 0}
    if not positions:
        return None
    latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
    specs = {TopicPartition(t, p): latest for t, p in positions}
    ends = admin.list_offsets(specs, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=TIMEOUT_S)
    out = {}
    for tp, future in ends.items():
        end = _result(future, f"end offset of {tp.topic}[{tp.partition}]").offset
        out[(tp.topic, tp.partition)] = (positions[(tp.topic, tp.partition)], end)
    return out


def new_admin(config: dict[str, Any]) -> AdminClient:
    return AdminClient(config)
