"""What the job asks Kafka directly (not through Spark): topics, end offsets, configs, group offsets.

End offsets are taken once, at start, with ``read_committed`` (the last stable offset):
a snapshot then covers a fixed prefix of each changelog that holds no record of an open
transaction, whatever the workers do while the job runs.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from typing import Any

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType  # type: ignore[attr-defined]

from baton import group_offsets
from baton.clients.settings import COMPACTOR_CLIENTS, KafkaSettings
from baton.clients.topic_ids import existing_topic_ids, topic_ids

CHANGELOG_SUFFIX = "-changelog"


@dataclass(frozen=True)
class Changelog:
    application_id: str
    store: str
    topic: str
    partitions: int


# "<app>-blue-x-changelog" is not a store "blue-x" of "<app>", nor "<app>-blue-g2-x-changelog" a
# store "g2-x" of "<app>-blue": colors and Rebuild generations are application ids of their own.
_OTHER_APP_ID = re.compile(r"^(blue-|green-|g[0-9]+-)")


def store_of(application_id: str, topic: str) -> str | None:
    """``<application.id>-<store>-changelog`` -> store, or None if the topic is not this app id's changelog.

    A store whose name starts like a color or generation suffix (``blue-``, ``green-``,
    ``g<N>-``) cannot be told apart from another application id's changelog and is skipped.
    """
    prefix = application_id + "-"
    if not (topic.startswith(prefix) and topic.endswith(CHANGELOG_SUFFIX)):
        return None
    store = topic[len(prefix) : -len(CHANGELOG_SUFFIX)]
    if not store or _OTHER_APP_ID.match(store):
        return None
    return store


class KafkaView:
    def __init__(self, bootstrap: str, extra: dict[str, Any] | None = None) -> None:
        self.settings = KafkaSettings.of(bootstrap, extra or {}, clients=COMPACTOR_CLIENTS)
        self.admin = AdminClient(self.settings.librdkafka("admin"))

    def changelogs(self, application_id: str) -> list[Changelog]:
        """Every changelog topic of one application id (one color), found by name."""
        meta = self.admin.list_topics(timeout=30)
        out = []
        for name, topic in sorted(meta.topics.items()):
            store = store_of(application_id, name)
            if store is None:
                continue
            out.append(Changelog(application_id, store, name, len(topic.partitions)))
        return out

    def offsets(self, topic: str, partitions: int) -> dict[int, tuple[int, int]]:
        """Partition -> (first offset, last stable offset)."""
        consumer = self._consumer(f"{topic}-compact-{uuid.uuid4().hex}")  # under the app's prefix (ACLs)
        try:
            return {
                p: tuple(consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30))  # type: ignore[misc]
                for p in range(partitions)
            }
        finally:
            consumer.close()

    def topic_ids(self, topics: list[str]) -> dict[str, str]:
        """Each changelog's topic id, written into its snapshots' manifests."""
        return topic_ids(self.admin, topics, timeout=30)

    def input_topic_ids(self, topics: list[str]) -> dict[str, str]:
        """Input topics' ids, for the recomputation audit; a topic that does not exist has none."""
        return existing_topic_ids(self.admin, topics, timeout=30)

    def configs(self, topic: str) -> dict[str, str]:
        resource = ConfigResource(ResourceType.TOPIC, topic)
        result = self.admin.describe_configs([resource])[resource].result(30)
        return {name: entry.value for name, entry in result.items() if entry.value is not None}

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        """The input positions a consumer group (one color of an app) has committed, stable ones only."""
        consumer = self._consumer(group)
        try:
            meta = self.admin.list_topics(timeout=30)
            listed = group_offsets.committed_offsets(self.admin, group, timeout=15) or []
            tps = [TopicPartition(tp.topic, tp.partition) for tp in listed if tp.topic in meta.topics]
            if not tps:
                return {}
            return {
                (tp.topic, tp.partition): tp.offset
                for tp in consumer.committed(tps, timeout=30)
                if tp.offset >= 0
            }
        finally:
            consumer.close()

    def _consumer(self, group: str) -> Consumer:
        """A consumer in ``group``: never joined, but librdkafka finds its coordinator, which under
        ACLs needs Describe on the group, so every group is named under the app's prefix."""
        return Consumer(
            {
                **self.settings.librdkafka("consumer"),
                "group.id": group,
                "isolation.level": "read_committed",
                "enable.auto.commit": False,
            }
        )
