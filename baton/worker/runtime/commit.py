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

Pipelined exactly-once commits
==============================

A commit's CPU work (the cache flush into the transaction) is the processing thread's;
the rest is waiting on the broker: the offsets' two round trips to the coordinator, the
records' acknowledgements and ``commit_transaction`` (~12 ms of every 100 ms interval,
docs/benchmarks.md, "Measured design choices": commit-order). The periodic commit hands
those waits to a committer thread and goes on processing. What makes that safe:

* ``Task.begin_commit`` and ``TaskStore.begin_commit`` cut, after the flush, what the
  commit covers: input positions, stream time, logged store updates. Records processed
  from then on change only the overlay and the write cache, never RocksDB, and become the
  next commit's.
* Nothing is produced while the commit is in flight: the next transaction cannot begin
  before ``commit_transaction`` returns, so ``Output.send`` first finishes the commit
  (``Output.hold``). A record that reaches a sink directly, a cache over its budget or a
  punctuator waits there, as it would have waited for the whole commit before; the click
  counter's records only reach the write cache, and never wait.
* The commit is finished on the processing thread (in ``send``, at the top of the loop, or
  before any other commit or abort): RocksDB batches, checkpoints and the next
  ``begin_transaction`` are the processing thread's alone.
* A commit that fails is found there too. Its transaction is aborted, and with it, by the
  next ``settle``, whatever was sent since; every task rewinds to its last committed
  offsets, so the records processed meanwhile are processed again, as after any failed
  commit.
* Every commit that is not the loop's periodic one (a revocation, a flip's drain markers,
  shutdown, the commit barrier before the member's JoinGroup) waits for its own end, as
  before.
* No commit is in flight while the member rejoins, and none is cut until the next
  assignment is applied (``Worker._before_rejoin``): one cut under a generation the join
  ends would be refused, and its whole transaction aborted (docs/architecture.md, "The
  commit barrier at rejoin").
* The periodic commit never waits for the one before it. When it comes due with that one
  still in flight, the loop goes on processing and commits at its first turn after that
  one is done, as Flink starts no checkpoint while one is in progress. A worker with spare
  CPU finishes a commit's broker part in a few milliseconds and keeps the interval; a
  saturated one, where every commit used to wait a little for the previous one, commits
  as often as the broker completes its commits (docs/benchmarks.md, "Measured design
  choices": commit-in-flight).

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
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from confluent_kafka import KafkaError, KafkaException, Producer, TopicPartition

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
    def commit(self, tasks: list[Task], *, wait: bool = True) -> bool:
        """Flush and commit every task; False means uncommitted work was dropped (rewind inputs).

        ``wait=False`` may return once the commit is under way (``settle`` reports how it ended).
        """

    @abstractmethod
    def abort(self) -> None:
        """Drop uncommitted output (lost tasks, shutdown after a failure)."""

    @property
    def unsettled(self) -> bool:
        """A commit is in flight, or ended in a failure ``settle`` has not reported yet."""
        return False

    def settle(self, wait: bool) -> bool | None:
        """Finish the commit in flight if it is done (or ``wait`` for it).

        True: it succeeded. False: a commit failed, its work and everything since is dropped
        (rewind inputs). None: nothing to report yet.
        """
        return None

    def close(self) -> None:
        return None


@dataclass
class _InFlight:
    tasks: list[Task]
    done: Future[None]


class ExactlyOnce(Guarantee):
    """Transactions, the broker's part of each commit on a committer thread (see the module doc)."""

    def __init__(self, output: Output, member: GroupMember) -> None:
        super().__init__(output, member)
        self._committer = ThreadPoolExecutor(1, thread_name_prefix="baton-commit")
        self._in_flight: _InFlight | None = None
        self._failed = False  # a commit failed while a record was being sent: settle reports it
        self._broken: BaseException | None = None  # finishing failed unexpectedly inside a send

    def start(self) -> None:
        self.output.producer.init_transactions(60)
        self.output.producer.begin_transaction()

    @property
    def unsettled(self) -> bool:
        return self._in_flight is not None or self._failed or self._broken is not None

    def commit(self, tasks: list[Task], *, wait: bool = True) -> bool:
        if self.settle(wait=True) is False:
            return False
        try:
            for task in tasks:
                task.flush()
            offsets = _offsets(tasks)
            metadata = self.member.group_metadata() if offsets else b""
        except (KafkaException, DeliveryFailed) as exc:
            log.warning("commit failed, aborting the transaction", extra={"error": str(exc)})
            self._recover(exc)
            return False
        for task in tasks:
            task.begin_commit()
        done = self._committer.submit(self._end_transaction, self.output.producer, offsets, metadata)
        self._in_flight = _InFlight(tasks, done)
        self.output.hold = self._hold
        if wait:
            return self.settle(wait=True) is not False
        return True

    def _end_transaction(self, producer: Producer, offsets: list[TopicPartition], metadata: object) -> None:
        """The committer thread: the broker's part of the commit, with no state of ours touched.

        The offsets first: their two round trips to the coordinator overlap the wait for the
        records' acknowledgements, which the flush then finds mostly done. The flush still
        comes before the commit, so the checkpoints hold every delivered offset.
        """
        if offsets:
            self._retry(lambda: producer.send_offsets_to_transaction(offsets, metadata, 30))
        self.output.flush()
        self._retry(lambda: producer.commit_transaction(60))

    def _finish(self) -> bool:
        """On the processing thread: wait for the commit in flight, then persist it or abort it."""
        flight, self._in_flight = self._in_flight, None
        self.output.hold = None
        assert flight is not None
        try:
            flight.done.result()
        except (KafkaException, DeliveryFailed) as exc:
            log.warning("commit failed, aborting the transaction", extra={"error": str(exc)})
            self._recover(exc)
            self._failed = True
            return False
        self.output.commit_succeeded()
        checkpoints = self.output.take_checkpoints()
        for task in flight.tasks:
            task.committed_ok(checkpoints)
        self.output.producer.begin_transaction()
        return True

    def _hold(self) -> None:
        """``Output.send`` while a commit is in flight: the record goes in the next transaction.

        Called inside processing, where an exception would be taken for the record's own
        failure (the dead-letter topic): a commit's failure is reported by ``settle``
        instead, and so is anything unexpected, which stops the worker there.
        """
        try:
            self._finish()
        except Exception as exc:
            self._broken = exc

    def settle(self, wait: bool) -> bool | None:
        if self._broken is not None:
            raise RuntimeError("finishing a commit failed") from self._broken
        outcome = None
        if self._in_flight is not None:
            if not wait and not self._in_flight.done.done():
                return None
            outcome = self._finish()
        if self._failed:
            self._failed = False
            if outcome is None:  # it failed inside a send: what was sent since is in the new transaction
                self.abort()
            return False
        return outcome

    def close(self) -> None:
        self._committer.shutdown(wait=True)

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
        if self._in_flight is not None:  # it ends either way; everything after it is dropped now
            self._finish()
        self._failed = False
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

    def commit(self, tasks: list[Task], *, wait: bool = True) -> bool:
        """Always in one step: the input offsets go to the group only after the store batches."""
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
            task.committed_ok(checkpoints)  # in one step: it covers everything processed so far
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
