"""Delete repartition records the app has committed past (Kafka Streams' repartition purge).

A repartition topic is the app's own: nobody but the downstream sub-topology reads it,
and once that reader's offset is committed the records before it are dead weight that
only retention would remove (by default a week of every record the app ever
repartitioned). Kafka Streams deletes them with delete-records every
``repartition.purge.interval.ms``; so does Baton, from the offsets of its own commits.

Only the member that owns a repartition partition's task commits for it, so each member
purges what it committed; the call is asynchronous (the broker answers later), and never on
the processing path. A purge that failed, or that a member killed before sending it never
sent, is sent again: failures are forgotten as purged, and the worker also offers its
tasks' committed offsets when it has nothing to commit (a quiet app, a task just taken
over), so the last records of a partition do not wait for input that may never come.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import Future
from typing import Protocol

from confluent_kafka import TopicPartition

log = logging.getLogger(__name__)


class DeletesRecords(Protocol):
    """The part of ``confluent_kafka.admin.AdminClient`` the purge uses."""

    def delete_records(
        self, topic_partition_offsets: list[TopicPartition], **kwargs: float
    ) -> Mapping[TopicPartition, Future[object]]: ...


def due_purges(
    committed: Iterable[tuple[str, int, int]],
    repartition_topics: set[str],
    purged: Mapping[tuple[str, int], int],
) -> dict[tuple[str, int], int]:
    """Repartition partitions whose committed offset moved past what was last purged (pure)."""
    out: dict[tuple[str, int], int] = {}
    for topic, partition, offset in committed:
        if topic in repartition_topics and offset > purged.get((topic, partition), 0):
            out[topic, partition] = max(offset, out.get((topic, partition), 0))
    return out


class RepartitionPurge:
    def __init__(self, admin: DeletesRecords, repartition_topics: set[str], interval_ms: int) -> None:
        self._admin = admin
        self._topics = repartition_topics
        self._interval = interval_ms / 1000
        self._purged: dict[tuple[str, int], int] = {}
        self._failed: list[tuple[str, int, int]] = []  # appended on the admin client's thread
        self._last = time.monotonic()

    @property
    def enabled(self) -> bool:
        return bool(self._topics)

    def after_commit(self, committed: Iterable[tuple[str, int, int]]) -> None:
        """Called with (topic, partition, offset) after every successful commit, and with the
        tasks' committed offsets when there was nothing to commit."""
        now = time.monotonic()
        if now - self._last < self._interval:
            return
        while self._failed:  # sent again below (list.pop is atomic against the callback's append)
            topic, partition, offset = self._failed.pop()
            if self._purged.get((topic, partition)) == offset:
                del self._purged[topic, partition]
        due = due_purges(committed, self._topics, self._purged)
        if not due:
            return
        self._last = now
        self._purged.update(due)
        requests = [TopicPartition(t, p, o) for (t, p), o in sorted(due.items())]
        try:
            futures = self._admin.delete_records(requests, request_timeout=30)
        except Exception as exc:  # a full queue or a closed client: the next round retries
            log.warning("repartition purge not sent", extra={"error": str(exc)})
            for key in due:
                self._purged.pop(key, None)
            return
        for tp, future in futures.items():
            future.add_done_callback(functools.partial(self._report, tp))

    def _report(self, tp: TopicPartition, future: Future[object]) -> None:
        """On the admin client's thread: log the outcome; a failed purge is sent again next round."""
        error = future.exception()
        where = {"topic": tp.topic, "partition": tp.partition, "before": tp.offset}
        if error is None:
            log.debug("repartition purged", extra=where)
        else:
            log.warning("repartition purge failed", extra={**where, "error": str(error)})
            self._failed.append((tp.topic, tp.partition, tp.offset))
