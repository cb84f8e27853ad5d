"""Commit protocols: exactly-once (transactions) and at-least-once.

Store checkpoints, and why the persistent store can never get ahead of committed data
====================================================================================

A store update travels: processor -> overlay (memory) -> changelog record (produced) ->
commit -> RocksDB batch {data, checkpoint}. The RocksDB batch is written only *after*
the commit has succeeded, and its checkpoint is ``last changelog offset delivered for
this store partition in that commit + 1``.

Under ``exactly_once_v2`` the changelog records, the sink records and the input offsets
are one Kafka transaction. Consider every way the process can stop:

* before ``commit_transaction`` returns: RocksDB still holds the previous commit's data
  and checkpoint. The open transaction is aborted (by our next ``init_transactions`` with
  the same ``transactional.id``, by the broker's transaction timeout, or because we abort
  it), ``read_committed`` readers never see it, and the input offsets are those of the
  previous commit. State, changelog and input position agree.
* after ``commit_transaction`` returns, before the RocksDB batch: the store is *behind*
  (previous checkpoint). On restart the restore replays the changelog from that
  checkpoint with ``read_committed``, which re-applies exactly the committed transaction.
  Behind is always repairable; ahead would not be.
* after the RocksDB batch: up to date.

Why ``last delivered offset + 1`` is the right checkpoint: every record of the committed
transaction for this partition is at or below that offset, and everything above it is
either the transaction's commit marker (skipped by consumers), later transactions
(committed ones are replayed, aborted ones skipped by ``read_committed``), or records
of another owner after a rebalance (replayed, as they must be). Using the high
watermark instead would be wrong: it can include records of a transaction that is
still open and may yet abort. Checkpointing *before* the commit would let a crash leave
data of an aborted transaction in RocksDB: the store ahead of committed data, the case
Kafka Streams avoids only by wiping the store.

A failed commit (abortable error, fencing by a newer instance, group generation
moved on) aborts the transaction; the overlays are dropped and every input is re-read
from its last committed offset. Fencing is a lost task, not a crash: the producer is
recreated and the group's rebalance decides what this process owns now. The group
generation in the transactional offset commit is that of Baton's membership client
(``assignment/membership.py``), not of the confluent consumer, which only reads records.

Under ``at_least_once`` there is no transaction: the producer is flushed (every
changelog record acknowledged), then the RocksDB batches are written, then the input
offsets are committed. A crash between those steps replays input against a store that
already counted it: duplicates, never loss, which is the contract.
"""

from __future__ import annotations

import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from baton.worker.runtime.producer import DeliveryFailed, Output
from baton.worker.runtime.task import Task

log = logging.getLogger(__name__)


def _offsets(tasks: Iterable[Task]) -> list[TopicPartition]:
    """Offsets to commit, each with its task's stream time as metadata (empty unless kept)."""
    return [
        TopicPartition(topic, task.partition, offset, task.commit_metadata())
        for task in tasks
        for topic, offset in task.commit_offsets().items()
    ]


class GroupMember(Protocol):
    """The group membership whose generation commits carry (so the broker fences zombies)."""

    def group_metadata(self) -> bytes: ...

    def commit(self, offsets: Mapping[tuple[str, int], tuple[int, str]], timeout: float = 30.0) -> None: ...


class Guarantee(ABC):
    def __init__(self, output: Output, member: GroupMember) -> None:
        self.output = output
        self.member = member

    @abstractmethod
    def start(self) -> None: ...

    @abstractmethod
    def commit(self, tasks: list[Task]) -> bool:
        """Flush and commit every task; False means uncommitted work was dropped (rewind inputs)."""

    @abstractmethod
    def abort(self) -> None:
        """Drop uncommitted output (lost tasks, shutdown after a failure)."""


class ExactlyOnce(Guarantee):
    def start(self) -> None:
        self.output.producer.init_transactions(60)
        self.output.producer.begin_transaction()

    def commit(self, tasks: list[Task]) -> bool:
        try:
            for task in tasks:
                task.flush()
            offsets = _offsets(tasks)
            # The offsets first: their two round trips to the coordinator overlap the wait for
            # the records' acknowledgements, which the flush then finds mostly done. The flush
            # still comes before the commit, so the checkpoints hold every delivered offset.
            if offsets:
                self._retry(
                    lambda: self.output.producer.send_offsets_to_transaction(
                        offsets, self.member.group_metadata(), 30
                    )
                )
            self.output.flush()
            self._retry(lambda: self.output.producer.commit_transaction(60))
        except (KafkaException, DeliveryFailed) as exc:
            log.warning("commit failed, aborting the transaction", extra={"error": str(exc)})
            self._recover(exc)
            return False
        self.output.commit_succeeded()
        checkpoints = self.output.take_checkpoints()
        for task in tasks:
            task.committed_ok(checkpoints)
        self.output.producer.begin_transaction()
        return True

    @staticmethod
    def _retry(call: object, attempts: int = 5) -> None:
        assert callable(call)
        for attempt in range(attempts):
            try:
                call()
                return
            except KafkaException as exc:
                err: KafkaError = exc.args[0]
                if not err.retriable() or attempt == attempts - 1:
                    raise
                time.sleep(0.1 * (attempt + 1))

    def _recover(self, exc: BaseException) -> None:
        self.output.commit_failed()
        fatal = isinstance(exc, KafkaException) and exc.args[0].fatal()
        if not fatal:
            try:
                self.output.producer.abort_transaction(30)
            except KafkaException as abort_exc:
                fatal = True
                log.warning("abort failed; recreating the producer", extra={"error": str(abort_exc)})
        if fatal:
            log.warning("producer fenced or failed fatally; recreating it")
            self.output.recreate()
            self.output.producer.init_transactions(60)
        self.output.transaction_aborted()
        self.output.producer.begin_transaction()

    def abort(self) -> None:
        try:
            self.output.producer.abort_transaction(30)
        except KafkaException as exc:
            self._recover(exc)
            return
        self.output.transaction_aborted()
        self.output.producer.begin_transaction()


class AtLeastOnce(Guarantee):
    def start(self) -> None:
        return None

    def commit(self, tasks: list[Task]) -> bool:
        try:
            for task in tasks:
                task.flush()
            self.output.flush()
        except DeliveryFailed as exc:
            log.warning("delivery failed; reprocessing from the last commit", extra={"error": str(exc)})
            self.output.changelog_offsets.clear()
            return False
        offsets = _offsets(tasks)
        checkpoints = self.output.take_checkpoints()
        for task in tasks:
            task.committed_ok(checkpoints)
        if offsets:
            try:
                self.member.commit(
                    {(tp.topic, tp.partition): (tp.offset, tp.metadata or "") for tp in offsets}
                )
            except Exception as exc:  # e.g. a rebalance moved the partitions: they will be reprocessed
                log.warning("offset commit failed", extra={"error": str(exc)})
        return True

    def abort(self) -> None:
        self.output.changelog_offsets.clear()
