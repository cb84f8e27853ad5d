"""The process's producer: one per worker, transactional under exactly-once.

It tracks, from delivery reports, the highest offset written to each changelog
partition since the last commit: those offsets become the stores' checkpoints once the
commit succeeds (see ``commit.py``).

An output record the broker will never take (too large for the topic, a topic this
worker may not write, one that does not exist) used to fail the commit, rewind the input
and fail again, for ever. Such a failure is remembered by the record's fingerprint; when
the replay produces the same record, ``send`` raises ``OutputRecordRefused`` and the
task hands its input record to the production error handler (the dead-letter topic, or
stop), like Kafka Streams' ProductionExceptionHandler. One abort per failed commit, never
a loop. A size error refuses the whole batch the record was in, so only a record that
alone exceeds the topic's ``max.message.bytes`` is remembered; its batch mates go through
on the replay. librdkafka refuses some records at once (larger than the producer's
``message.max.bytes``): those raise on the first try.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from baton.worker.topology.context import Headers

log = logging.getLogger(__name__)


class DeliveryFailed(Exception):
    """A record could not be written; uncommitted work must be redone."""


class OutputRecordRefused(Exception):
    """This output record is refused whatever the retries: the production error handler decides."""

    def __init__(self, topic: str, error: KafkaError) -> None:
        super().__init__(f"output record to {topic} refused: {error.str()} ({error.name()})")
        self.topic = topic
        self.error = error


def dead_letter_stage(error: BaseException) -> str:
    """The dead-letter header's stage: the broker refused the output record, or processing failed."""
    return "produce" if isinstance(error, OutputRecordRefused) else "process"


# Errors that refuse every record to the topic (partition): each failed record is refused.
TOPIC_REFUSALS = frozenset(
    {
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
    }
)
# Size errors refuse a whole record batch: only a record that alone exceeds the topic's
# max.message.bytes is refused (the others were in its batch, and go through on the replay).
SIZE_REFUSALS = frozenset(
    {KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE, KafkaError.INVALID_MSG_SIZE}
)
REFUSED_AT_ONCE = TOPIC_REFUSALS | SIZE_REFUSALS  # what produce() itself may raise for one record
BATCH_OVERHEAD = 61 + 21  # a v2 record batch header and the most a record's own framing takes
MAX_REMEMBERED = 10_000  # refused fingerprints kept (oldest dropped first)

Fingerprint = tuple[str, int, int, int]


def fingerprint(topic: str, key: bytes | None, value: bytes | None) -> Fingerprint:
    return topic, hash(key), hash(value), len(value or b"")


def record_size(key: bytes | None, value: bytes | None, headers: Headers | None) -> int:
    """What one record takes in a batch of its own, uncompressed."""
    extra = sum(len(k) + len(v or b"") for k, v in headers or ())
    return len(key or b"") + len(value or b"") + extra + BATCH_OVERHEAD


class Output:
    def __init__(
        self,
        config: dict[str, Any],
        changelog_topics: set[str],
        size_limit: Callable[[str], int | None] = lambda _topic: None,
    ) -> None:
        self._config = dict(config)
        self._size_limit = size_limit  # a topic's max.message.bytes, asked once a size error is seen
        self._changelogs = changelog_topics
        self.changelog_offsets: dict[tuple[str, int], int] = {}
        self.errors: list[KafkaError] = []
        self.refused: dict[Fingerprint, KafkaError] = {}  # insertion order: the oldest is dropped first
        self.sent = 0
        # Delivery reports: every changelog record needs one (its offset is the store's next
        # checkpoint). Other records need one only to learn that they failed. In a
        # transaction they need none: a record that fails permanently fails the commit
        # (librdkafka's commit_transaction returns an abortable error), and a report costs a
        # Python call and a Message object per record (11 % of the click counter's time,
        # docs/benchmarks.md, "Measured design choices": delivery-reports). So under
        # exactly-once only changelog records are reported,
        # until a commit fails: then every record is, until a commit succeeds, so that the
        # replay learns which record the broker refuses (``refused``, see the module doc).
        self.transactional = "transactional.id" in config
        self.report_every_delivery = not self.transactional
        self._report = self._delivered  # bound once: send() picks it per record
        # Set while an exactly-once commit waits on the broker (``commit.py``): a record sent
        # now belongs to the next transaction, which begins only once that commit is done,
        # so send() first calls this, and it returns when the commit has finished.
        self.hold: Callable[[], None] | None = None
        self.producer = self._new_producer()

    def _new_producer(self) -> Producer:
        return Producer(self._config)

    def commit_failed(self) -> None:
        """A transaction failed: report every delivery until a commit succeeds (see ``__init__``)."""
        self.report_every_delivery = True

    def commit_succeeded(self) -> None:
        self.report_every_delivery = not self.transactional

    def recreate(self) -> None:
        """After a fatal error (e.g. fenced): a fresh producer, same transactional.id."""
        try:
            self.producer.flush(0)
        except Exception:  # a fenced producer may refuse anything; it is dropped either way
            log.debug("flush of dropped producer failed", exc_info=True)
        self.transaction_aborted()  # the dropped producer's transaction is aborted by the new one's init
        self.producer = self._new_producer()

    def _delivered(self, err: KafkaError | None, msg: Message) -> None:
        if err is not None:
            self.errors.append(err)
            failed_topic = msg.topic() or ""
            refused = err.code() in TOPIC_REFUSALS
            if err.code() in SIZE_REFUSALS:
                limit = self._size_limit(failed_topic)
                headers = msg.headers()
                pairs = list(headers.items()) if isinstance(headers, dict) else headers
                refused = limit is not None and record_size(msg.key(), msg.value(), pairs) > limit
            if refused:
                self.refused[fingerprint(failed_topic, msg.key(), msg.value())] = err
                while len(self.refused) > MAX_REMEMBERED:
                    del self.refused[next(iter(self.refused))]
            return
        topic = msg.topic()
        if topic in self._changelogs:
            partition, offset = msg.partition(), msg.offset()
            assert topic is not None and partition is not None and offset is not None
            tp = (topic, partition)
            if offset > self.changelog_offsets.get(tp, -1):
                self.changelog_offsets[tp] = offset

    def send(  # noqa: PLR0917 - matches context.Send, the hot path
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: int,
        headers: Headers | None,
    ) -> None:
        if self.hold is not None:
            self.hold()
        producer = self.producer
        if self.refused:
            refused = self.refused.get(fingerprint(topic, key, value))
            if refused is not None:
                raise OutputRecordRefused(topic, refused)
        # Positional arguments (topic, value, key, partition, callback, on_delivery, timestamp,
        # headers): confluent-kafka's keyword parsing costs ~1 µs a call, as much as the rest of
        # produce() (docs/benchmarks.md, "Measured design choices": positional-produce).
        # Partition -1 is librdkafka's "unassigned":
        # the configured partitioner picks it.
        where = -1 if partition is None else partition
        report = self._report if self.report_every_delivery or topic in self._changelogs else None
        while True:
            try:
                producer.produce(topic, value, key, where, report, None, timestamp, headers)
                break
            except BufferError:  # local queue full: let librdkafka drain it
                producer.poll(0.05)
            except KafkaException as exc:
                err = exc.args[0]
                if isinstance(err, KafkaError) and err.code() in REFUSED_AT_ONCE:
                    raise OutputRecordRefused(topic, err) from exc
                raise
        self.sent += 1

    def send_covered(  # noqa: PLR0917 - matches context.Send, the hot path
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: int,
        headers: Headers | None,
    ) -> None:
        """A changelog record that a later record of the same flush and partition follows.

        Under exactly-once it needs no delivery report: one idempotent producer writes a
        partition in order, so the later record's offset, the checkpoint, covers it, and a
        failure fails the transaction. That leaves one report per store flush instead of one
        per flushed entry. Reports are Python calls that run on whichever thread waits for
        the acknowledgements, the committer thread of a pipelined commit, where each one
        contends for the GIL with the processing thread. Everything that is not the plain
        case (reports for every record, a commit in flight, refused records, a full queue,
        an error) takes ``send``.
        """
        if self.report_every_delivery or self.hold is not None or self.refused:
            self.send(topic, key, value, partition, timestamp, headers)
            return
        try:
            self.producer.produce(
                topic, value, key, -1 if partition is None else partition, None, None, timestamp, headers
            )
        except (BufferError, KafkaException):  # not queued: send retries it, or raises what it means
            self.send(topic, key, value, partition, timestamp, headers)
            return
        self.sent += 1

    def flush(self, timeout: float = 60.0) -> None:
        """Wait for every delivery report; raise if any record failed."""
        remaining = self.producer.flush(timeout)
        if remaining:
            raise DeliveryFailed(f"{remaining} records not delivered within {timeout}s")
        if self.errors:
            first = self.errors[0]
            self.errors.clear()
            raise DeliveryFailed(f"delivery failed: {first}")

    def transaction_aborted(self) -> None:
        """Forget what the aborted transaction's deliveries reported.

        ``abort_transaction`` purges queued records and reports each as failed
        (``_PURGE_QUEUE``) before it returns: kept, those reports would fail the next
        commit as well, though its records are fine. A record the broker refused is
        already remembered in ``refused`` by then.
        """
        self.changelog_offsets.clear()
        self.errors.clear()

    def take_checkpoints(self) -> dict[tuple[str, int], int]:
        """Changelog checkpoints (next offset) of everything delivered since the last call."""
        out = {tp: offset + 1 for tp, offset in self.changelog_offsets.items()}
        self.changelog_offsets.clear()
        return out
