"""Internal topics: changelogs, repartition topics and the DLQ, created by the worker if absent.

Partition counts follow Kafka Streams: a sub-topology's changelogs and the repartition
topics it reads have as many partitions as its widest source topic, so task ``s_p``
always finds partition ``p`` everywhere.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, OffsetSpec  # type: ignore[attr-defined]
from confluent_kafka.cimpl import NewTopic

from baton.clients.topic_ids import topic_ids
from baton.worker.naming import changelog_topic, dlq_topic, internal_topic
from baton.worker.topology.graph import (
    BuiltTopology,
    JoinNode,
    MergeNode,
    SinkNode,
    StreamJoinNode,
    SubTopology,
    TableJoinNode,
    reachable,
)

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
    """The internal topics a topology needs (pure, apart from the partition counts it is given).

    A repartition topic is as wide as the sub-topology that writes it, except the
    foreign-key join's (``consumer_sized``): they are as wide as the external topics of the
    sub-topology that reads them, the table they must be co-partitioned with. Those two
    topics go both ways between two sub-topologies, so widths are settled in rounds.
    """
    out: list[NewTopic] = []
    subs = topology.subtopologies
    readers = {t: sub for sub in subs for s in sub.sources if s.internal for t in s.topics}

    def external(sub: SubTopology) -> list[int]:
        return [source_partitions[t] for s in sub.sources if not s.internal for t in s.topics]

    width = {
        t: max(external(readers[t])) for t in topology.consumer_sized if t in readers and external(readers[t])
    }
    counts: dict[int, int] = {}
    while len(counts) < len(subs):
        before = len(counts)
        for sub in subs:  # usually one round: writers of a repartition topic come first
            internal = [t for s in sub.sources if s.internal for t in s.topics]
            if sub.index in counts or any(t not in width for t in internal):
                continue
            counts[sub.index] = max(external(sub) + [width[t] for t in internal])
            for topic in _sinks_internal(sub):
                width.setdefault(topic, counts[sub.index])
        if len(counts) == before:
            raise ValueError("repartition topics read in a cycle with no external topic to size them")
    for sub in subs:
        for topic in _sinks_internal(sub):
            out.append(
                NewTopic(
                    internal_topic(application_id, topic),
                    num_partitions=width[topic],
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


def create_for(
    admin: AdminClient,
    topology: BuiltTopology,
    app: str,
    topic_to_sub: dict[str, int],
    replication_factor: int,
) -> None:
    """Create the application's missing internal topics, sized from its input and table topics."""
    external = [
        t
        for t in topic_to_sub
        if not any(
            s.internal and f"{app}-{x}" == t
            for sub in topology.subtopologies
            for s in sub.sources
            for x in s.topics
        )
    ]
    tables = [
        t.store.source_topic for sub in topology.subtopologies for t in sub.tables if t.store.source_topic
    ]
    counts = partition_counts(admin, external + tables, timeout=60)
    problem = copartitioning_problem(topology, counts)
    if problem:
        raise CoPartitioningError(problem)
    ensure_topics(admin, planned_topics(topology, app, counts, replication_factor))


class CoPartitioningError(RuntimeError):
    """Joined topics with different partition counts: equal keys would land in different tasks."""


def copartitioning_problem(topology: BuiltTopology, partitions: Mapping[str, int]) -> str:
    """Why the topology's joins cannot run on these topics (empty: they can). Pure.

    A join meets records of equal keys only if both inputs put a key in the same partition
    number, which needs the same partition count (and partitioner). Kafka Streams refuses
    such a topology at startup; so does Baton, naming the topics, instead of silently
    joining only the keys that happen to line up. Streams merged ahead of a stateful step
    meet in its stores the same way, so they are checked too.
    """
    for sub in topology.subtopologies:
        nodes = reachable(list(sub.sources))
        merged_state = bool(sub.stores) and any(isinstance(n, MergeNode) for n in nodes)
        if not merged_state and not any(
            isinstance(n, JoinNode | StreamJoinNode | TableJoinNode) for n in nodes
        ):
            continue
        topics = [t for src in sub.sources if not src.internal for t in src.topics]
        topics += [t.store.source_topic for t in sub.tables if t.store.source_topic]
        counts = {t: partitions[t] for t in topics if t in partitions}
        if len(set(counts.values())) > 1:
            listed = ", ".join(f"{t} ({n})" for t, n in sorted(counts.items()))
            return (
                f"joined (or merged, then aggregated) topics must be co-partitioned (the same number of partitions and the same key): "
                f"{listed}; repartition one side (group_by/through a topic of the other's size) first"
            )
    return ""


class TopicFacts:
    """What the worker reads about topics after start-up, each read when first needed.

    Settings are cached per topic (``max.message.bytes`` after the broker refused a batch as
    too large, ``delete.retention.ms`` before a restore from a snapshot); end offsets are
    read fresh (the group leader turns the members' offset sums into lags with them)."""

    def __init__(self, admin: AdminClient) -> None:
        self._admin = admin
        self._settings: dict[str, dict[str, str]] = {}

    def setting(self, topic: str, name: str) -> int | None:
        """One integer setting of a topic; None, logged, if it cannot be read."""
        if topic not in self._settings:
            try:
                self._settings[topic] = topic_settings(self._admin, topic)
            except Exception as exc:
                log.warning(
                    "topic settings unknown", extra={"topic": topic, "setting": name, "error": str(exc)}
                )
                return None
        value = self._settings[topic].get(name)
        return int(value) if value is not None else None

    def topic_id(self, topic: str) -> str | None:
        """The topic's id, read fresh (a changelog may be recreated while the worker runs); None, logged, if unknown."""
        try:
            return topic_ids(self._admin, [topic]).get(topic)
        except Exception as exc:
            log.warning("topic id unknown", extra={"topic": topic, "error": str(exc)})
            return None

    def size_limit(self, topic: str) -> int | None:
        """The topic's max.message.bytes (unknown: nothing is refused by size, the commit fails as before)."""
        return self.setting(topic, "max.message.bytes")

    def end_offsets(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int] | None:
        """Membership thread, on the leader: the changelogs' ends, to turn offset sums into lags."""
        try:
            latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
            futures = self._admin.list_offsets(
                {TopicPartition(t, p): latest for t, p in partitions}, request_timeout=10
            )
            return {(tp.topic, tp.partition): int(f.result(15).offset) for tp, f in futures.items()}
        except Exception as exc:
            log.warning(
                "changelog end offsets unknown; reported state counts as caught up", extra={"error": str(exc)}
            )
            return None
