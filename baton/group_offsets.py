"""A consumer group's committed offsets through the AdminClient, without librdkafka's crash.

librdkafka (2.16, and still on its master: upstream issue 5040) dereferences a null
consumer group inside an AdminClient when an OffsetFetch comes back "not coordinator" or
"coordinator not available", and the whole process dies with SIGSEGV. That is the answer
of a broker whose ``__consumer_offsets`` is still being created or loaded: a new cluster,
or a coordinator moving while a broker restarts. DescribeGroups goes to the same
coordinator and takes the same answer as an ordinary error, so it is asked first; offsets
are fetched only once the coordinator has answered, and not at all for a group that does
not exist. The operator (lag), the compactor (audits) and the benchmarks all read
offsets through here.
"""

from __future__ import annotations

from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition


def committed_offsets(
    admin: Any, group: str, partitions: list[TopicPartition] | None = None, timeout: float = 10.0
) -> list[TopicPartition] | None:
    """The group's committed offsets (all partitions, or ``partitions``); None if there is no such group.

    Raises ``KafkaException`` while the group's coordinator is not ready (the caller retries).
    """
    description = admin.describe_consumer_groups([group], request_timeout=timeout)[group].result(timeout * 2)
    if description.state == ConsumerGroupState.DEAD:
        return None
    request = [ConsumerGroupTopicPartitions(group, partitions)]
    listed = admin.list_consumer_group_offsets(request, request_timeout=timeout)[group].result(timeout * 2)
    return list(listed.topic_partitions or [])
