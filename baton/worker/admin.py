"""Internal topics: changelogs, repartition topics and the DLQ, created by the worker if absent.

Partition counts follow Kafka Streams: a sub-topology's changelogs and the repartition
topics it reads have as many partitions as its widest source topic, so task ``s_p``
always finds partition ``p`` everywhere.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from baton.worker.graph import BuiltTopology, SinkNode, SubTopology, reachable
from baton.worker.naming import changelog_topic, dlq_topic, internal_topic

log = logging.getLogger(__name__)

# Compaction must actually run on changelogs, or restores replay every update ever made.
CHANGELOG_CONFIG = {
    "cleanup.policy": "compact",
    "segment.ms": "600000",
    "segment.bytes": str(16 * 1024 * 1024),
    "min.cleanable.dirty.ratio": "0.1",
    "message.timestamp.type": "CreateTime",
}
REPARTITION_CONFIG = {"cleanup.policy": "delete", "retention.ms": "-1", "segment.ms": "600000"}
DLQ_CONFIG = {"cleanup.policy": "delete"}


def partition_counts(admin: AdminClient, topics: list[str], timeout: float = 30.0) -> dict[str, int]:
    """Partitions of each topic, waiting (up to ``timeout``) for topics that do not exist yet."""
    deadline = time.monotonic() + timeout
    while True:
        meta = admin.list_topics(timeout=10)
        found = {
            t: len(meta.topics[t].partitions)
            for t in topics
            if t in meta.topics and meta.topics[t].error is None and meta.topics[t].partitions
        }
        missing = [t for t in topics if t not in found]
        if not missing:
            return found
        if time.monotonic() > deadline:
            raise RuntimeError(f"source topics do not exist: {', '.join(missing)}")
        time.sleep(0.5)


def planned_topics(
    topology: BuiltTopology, application_id: str, source_partitions: dict[str, int], replication_factor: int
) -> list[NewTopic]:
    """The internal topics a topology needs (pure, apart from the partition counts it is given)."""
    counts: dict[int, int] = {}
    out: list[NewTopic] = []
    repartition_width: dict[str, int] = {}
    for sub in topology.subtopologies:  # sub-topologies are ordered: producers of a repartition come first
        widths = [source_partitions[t] for s in sub.sources if not s.internal for t in s.topics]
        widths += [repartition_width[t] for s in sub.sources if s.internal for t in s.topics]
        counts[sub.index] = max(widths)
        for node in _sinks_internal(sub):
            repartition_width[node] = counts[sub.index]
            out.append(
                NewTopic(
                    internal_topic(application_id, node),
                    num_partitions=counts[sub.index],
                    replication_factor=replication_factor,
                    config=REPARTITION_CONFIG,
                )
            )
        for store in sub.stores:
            out.append(
                NewTopic(
                    changelog_topic(application_id, store.name),
                    num_partitions=counts[sub.index],
                    replication_factor=replication_factor,
                    config=CHANGELOG_CONFIG,
                )
            )
    out.append(
        NewTopic(
            dlq_topic(application_id),
            num_partitions=1,
            replication_factor=replication_factor,
            config=DLQ_CONFIG,
        )
    )
    return out


def _sinks_internal(sub: SubTopology) -> list[str]:
    return [n.topic for n in reachable(list(sub.sources)) if isinstance(n, SinkNode) and n.internal]


def ensure_topics(admin: AdminClient, topics: list[NewTopic]) -> None:
    """Create the topics that do not exist; existing ones are left as they are."""
    if not topics:
        return
    futures = admin.create_topics(topics, operation_timeout=30)
    for name, future in futures.items():
        try:
            future.result(60)
            log.info("created topic", extra={"topic": name})
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
    partition_counts(admin, [t.topic for t in topics])


def topic_settings(admin: AdminClient, topic: str, timeout: float = 15.0) -> dict[str, str]:
    """Every setting of one topic as the broker reports it (defaults included)."""
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource], request_timeout=timeout)[resource].result(timeout)
    return {k: c.value for k, c in configs.items() if c.value is not None}
