"""Names of internal topics and tasks, derived from the application id (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from baton.worker.topology.graph import BuiltTopology


def changelog_topic(application_id: str, store: str) -> str:
    return f"{application_id}-{store}-changelog"


def dlq_topic(application_id: str) -> str:
    return f"{application_id}-dlq"


def internal_topic(application_id: str, suffix: str) -> str:
    return f"{application_id}-{suffix}"


@dataclass(frozen=True, order=True)
class TaskId:
    """Kafka Streams' task id: sub-topology index and partition, printed ``1_3``."""

    subtopology: int
    partition: int

    def __str__(self) -> str:
        return f"{self.subtopology}_{self.partition}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        sub, partition = text.split("_")
        return cls(int(sub), int(partition))


def source_topics(topology: BuiltTopology, application_id: str) -> dict[str, int]:
    """Every topic the consumer group subscribes to (full names) -> its sub-topology index."""
    out: dict[str, int] = {}
    for sub in topology.subtopologies:
        for source in sub.sources:
            for topic in source.topics:
                out[internal_topic(application_id, topic) if source.internal else topic] = sub.index
    return out


def tasks_for(
    assigned: list[tuple[str, int]], topic_to_sub: dict[str, int]
) -> dict[TaskId, list[tuple[str, int]]]:
    """Group assigned (topic, partition) pairs into tasks: one task per sub-topology and partition."""
    tasks: dict[TaskId, list[tuple[str, int]]] = {}
    for topic, partition in sorted(assigned):
        tasks.setdefault(TaskId(topic_to_sub[topic], partition), []).append((topic, partition))
    return tasks
