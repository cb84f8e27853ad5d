"""Which repartition records may be deleted: only below what was committed, only when it moved."""

from __future__ import annotations

from concurrent.futures import Future

import pytest
from confluent_kafka import KafkaException, TopicPartition

from baton.worker.runtime.purge import RepartitionPurge, due_purges

pytestmark = pytest.mark.unit


def test_only_repartition_topics_whose_committed_offset_moved_are_purged() -> None:
    committed = [("app-by-page-repartition", 0, 120), ("app-by-page-repartition", 1, 40), ("clicks", 0, 999)]
    purged = {("app-by-page-repartition", 1): 40}
    assert due_purges(committed, {"app-by-page-repartition"}, purged) == {("app-by-page-repartition", 0): 120}
    assert due_purges(committed, set(), {}) == {}  # no repartition step: nothing, ever
    assert due_purges([("app-by-page-repartition", 0, 0)], {"app-by-page-repartition"}, {}) == {}


class _Admin:
    """Records each delete-records request; the test settles its futures as the broker would."""

    def __init__(self) -> None:
        self.sent: list[list[tuple[str, int, int]]] = []
        self.futures: list[Future[object]] = []

    def delete_records(
        self, topic_partition_offsets: list[TopicPartition], **_kwargs: float
    ) -> dict[TopicPartition, Future[object]]:
        self.sent.append([(tp.topic, tp.partition, tp.offset) for tp in topic_partition_offsets])
        out: dict[TopicPartition, Future[object]] = {}
        for tp in topic_partition_offsets:
            future: Future[object] = Future()
            self.futures.append(future)
            out[tp] = future
        return out


def test_a_failed_purge_is_sent_again_though_nothing_new_was_committed() -> None:
    """Found by tests/integration/test_engine_repartition.py under load: a purge the broker
    refused was remembered as done, so the last records of a quiet partition stayed forever."""
    admin = _Admin()
    purge = RepartitionPurge(admin, {"r"}, interval_ms=0)
    purge.after_commit([("r", 0, 50), ("r", 1, 70)])
    assert admin.sent == [[("r", 0, 50), ("r", 1, 70)]]
    admin.futures[0].set_exception(KafkaException("NOT_LEADER_OR_FOLLOWER"))
    admin.futures[1].set_result(None)
    purge.after_commit([("r", 0, 50), ("r", 1, 70)])  # the same offsets: nothing new committed
    assert admin.sent[1] == [("r", 0, 50)], "only the failed one again"
    admin.futures[2].set_result(None)
    purge.after_commit([("r", 0, 50), ("r", 1, 70)])
    assert len(admin.sent) == 2, "both done: nothing more to send"
