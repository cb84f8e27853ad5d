"""A task: one partition of one sub-topology, with its processors and stores.

The task knows nothing of consumers, producers or transactions: the runtime hands it
records, asks it to flush before a commit, and tells it which changelog offsets became
durable. That keeps the processing path testable with plain objects.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from baton.worker.naming import TaskId, changelog_topic, internal_topic
from baton.worker.runtime import own_json
from baton.worker.runtime.processors.base import ProcessorNode
from baton.worker.runtime.processors.custom import CustomProcessor
from baton.worker.runtime.producer import dead_letter_stage
from baton.worker.runtime.punctuation import NO_TIME, Punctuations
from baton.worker.runtime.record import Message, Record
from baton.worker.runtime.tree import FastPath, build_tree, fast_path
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import CacheBudget, TaskStore
from baton.worker.topology.context import RecordContext, Send, SinkGate
from baton.worker.topology.graph import SourceNode, SubTopology
from baton.worker.topology.serdes import fast_deserializer

log = logging.getLogger(__name__)

# (error, stage, message): send to the DLQ, or raise RecordFailed under the fail handler
DeadLetter = Callable[[BaseException, str, Message], None]


class _Source:
    __slots__ = (
        "deserialize_key",
        "deserialize_value",
        "forward",
        "fused",
        "key_serde",
        "timestamp",
        "value_serde",
    )

    def __init__(self, root: ProcessorNode, node: SourceNode, *, fused: FastPath | None) -> None:
        self.forward = root.forward  # bound to the source's children by build_tree
        self.key_serde, self.value_serde = node.key_serde, node.value_serde
        # the serdes' C functions where they have them: a Python call less per record each
        self.deserialize_key = fast_deserializer(node.key_serde)
        self.deserialize_value = fast_deserializer(node.value_serde)
        aggregator = own_json.straight_aggregator(root)
        if aggregator is not None and own_json.takes_as_read(node, aggregator):
            # a count straight from Baton's own JSON repartition topic: the fused loops' rule
            self.deserialize_value = own_json.own_json_value
        self.timestamp = node.timestamp
        self.fused = fused  # one loop for the whole tree, when it is a shape one knows (tree.fast_path)

    def deserialize_checked(self, raw_key: bytes | None, raw_value: bytes | None) -> tuple[Any, Any]:
        """Key and value by the serdes' own ``deserialize``, for a record the C functions refused.

        The fast path is only a shortcut: whatever the serde accepts is processed (a
        ``bytearray`` from the compactor's replay, which ``bytes.decode`` refuses), and what
        it refuses raises the serde's own error, worded for users, for the dead letter.
        """
        key = None if raw_key is None else self.key_serde.deserialize(raw_key)
        value = None if raw_value is None else self.value_serde.deserialize(raw_value)
        return key, value


class InvalidTimestamp(ValueError):
    """The timestamp extractor returned a negative time."""


class Task:
    def __init__(
        self,
        task_id: TaskId,
        sub: SubTopology,
        *,
        application_id: str,
        stores: dict[str, KeyValueStore],
        send: Send,
        gate: SinkGate,
        caching: bool,
        dead_letter: DeadLetter,
        cache_budget: CacheBudget | None = None,
        on_late: Callable[[], None] = lambda: None,
        global_stores: Mapping[str, KeyValueStore] | None = None,
        send_covered: Send | None = None,
        fuse_aggregations: bool = True,
        on_latency: Callable[[float], None] | None = None,
    ) -> None:
        """``fuse_aggregations=False`` keeps every record on the general path: the reference
        the fast paths (``tree.fast_path``) and ``TaskStore.forward_serialized`` are tested against."""
        self.id = task_id
        self.sub = sub
        self.partition = task_id.partition
        self.persistent = stores
        self.ctx = RecordContext()
        self._dead_letter = dead_letter
        self.stores = {
            spec.name: TaskStore(
                spec=spec,
                persistent=stores[spec.name],
                changelog_topic=changelog_topic(application_id, spec.name),
                partition=task_id.partition,
                send=send,
                send_covered=send_covered,
                ctx=self.ctx,
                caching=caching,
                budget=cache_budget,
            )
            for spec in sub.stores
        }
        for store in self.stores.values():
            store.on_flush_error = self._flush_error
        tables = {t.store.name: stores[t.store.name].get for t in sub.tables}
        memo: dict[int, ProcessorNode] = {}
        # Stream time of the task, kept only for custom processors' punctuators: committed
        # with the offsets (as their metadata) so a restarted task fires where this one would.
        self.punctuations = Punctuations()
        self._tracks_time = sub.custom
        self.stream_time = self.committed_stream_time = NO_TIME

        def topic_name(topic: str, internal: bool) -> str:
            return internal_topic(application_id, topic) if internal else topic

        self._sources: dict[str, _Source] = {}
        for node in sub.sources:
            root = build_tree(
                node,
                ctx=self.ctx,
                send=send,
                gate=gate,
                stores=self.stores,
                tables=tables,
                global_stores=global_stores or {},
                topic_name=topic_name,
                memo=memo,
                on_late=on_late,
                punctuations=self.punctuations,
                stream_time=lambda: self.stream_time,
            )
            fused = (
                fast_path(
                    node,
                    root,
                    self.ctx,
                    dead_letter,
                    partition=self.partition,
                    custom=sub.custom,
                    tables={t.store.name: stores[t.store.name] for t in sub.tables},
                )
                if fuse_aggregations
                else None
            )
            for topic in node.topics:
                self._sources[topic_name(topic, node.internal)] = _Source(root, node, fused=fused)
        if not fuse_aggregations:  # the store's flush hands a sink its bytes: fused too
            for store in self.stores.values():
                store.forward_serialized = None
        self._custom = [p for p in memo.values() if isinstance(p, CustomProcessor)]
        # next offset to read per input topic, as of the last processed record / last commit
        self.positions: dict[str, int] = {}
        self.committed: dict[str, int] = {}
        self.processed_since_commit = 0
        # The end-to-end latency: the oldest record timestamp (ms) processed since the last
        # commit began, observed when that commit succeeds (``committed_ok``). Read once per
        # run of records, not per record: a run's first record is its oldest but for
        # producers' out-of-order timestamps, which the figure then slightly understates.
        self._on_latency = on_latency
        self._oldest: int | None = None
        # positions, stream time and oldest record as of the commit in flight (``begin_commit``)
        self._committing: tuple[dict[str, int], int, int | None] | None = None

    @property
    def input_topics(self) -> list[str]:
        return list(self._sources)

    def process(self, msg: Message) -> None:
        """Run one record through the whole sub-topology (see ``process_run``)."""
        self.process_run([msg])

    def process_run(self, messages: Sequence[Message], start: int = 0, end: int | None = None) -> int:
        """Run consecutive records of one input partition through the sub-topology, one by one.

        Processes ``messages[start:end]`` up to the first record of another topic or
        partition, or one that carries a consumer error, and returns the index it stopped
        at. ``consume()`` hands the loop runs of one partition's records, so taking a whole
        run here costs the source lookup, the context's topic and partition and the
        position bookkeeping once per run instead of once per record (a Python call per
        record less; measured with the read cache: docs/benchmarks.md, "Measured design choices":
        process-run). Each record still
        goes depth first through the whole tree before the next one, so order per key,
        the write cache and exactly-once are exactly those of record-at-a-time.
        Bad records go to the dead-letter handler; if that raises (the fail handler), the
        records before the failing one stay processed.

        The per-record path of every application: written for CPython's speed (locals,
        chained stores, no helper calls), not for looks. A source that feeds an aggregation
        runs the fused loop instead (``runtime/fused.py``), and so does a source whose tree is
        a line of processors ending in a sink or an aggregation (``runtime/fused_chain.py``), to
        the same effect.
        """
        stop = len(messages) if end is None else end
        first = messages[start]
        if self._oldest is None:
            self._oldest = first.timestamp()[1]
        topic = first.topic()
        assert topic is not None
        source = self._sources[topic]
        if source.fused is not None:
            return self._process_fused(source, source.fused, messages, start, stop)
        return self._process_general(source, messages, start, stop)

    def _process_fused(
        self, source: _Source, fused: FastPath, messages: Sequence[Message], start: int, stop: int
    ) -> int:
        """The fused loop, and the general path for each record it hands back (one that does not deserialize)."""
        first = messages[start]
        topic, partition = first.topic(), first.partition()
        assert topic is not None
        i = start
        while True:
            try:
                fused.run(messages, i, stop)
            finally:
                j = fused.stopped
                if j > i:
                    self.positions[topic] = messages[j - 1].offset() + 1  # type: ignore[operator]
                    self.processed_since_commit += j - i
            if j >= stop or not _continues(messages[j], topic, partition):
                return j  # the run ended
            i = self._process_general(source, messages, j, j + 1)
            if i >= stop or not _continues(messages[i], topic, partition):
                return i

    def _process_general(self, source: _Source, messages: Sequence[Message], start: int, stop: int) -> int:
        first = messages[start]
        topic, partition = first.topic(), first.partition()
        assert topic is not None
        ctx = self.ctx
        own_partition = self.partition
        ctx.topic = topic
        ctx.partition = own_partition
        extract = source.timestamp
        deserialize_key, deserialize_value = source.deserialize_key, source.deserialize_value
        forward, dead_letter = source.forward, self._dead_letter
        tracks_time = self._tracks_time
        i, offset, done = start, -1, -1  # done: the offset of the last record fully processed
        try:
            while i < stop:
                msg = messages[i]
                if msg.partition() != partition or msg.topic() != topic or msg.error() is not None:
                    break  # the end of the run (``run_end``'s test, inlined: once per record)
                offset = msg.offset()  # type: ignore[assignment]
                ctx.offset = offset
                ctx.timestamp = msg.timestamp()[1]
                raw_key = msg.key()
                raw_value = msg.value()
                try:
                    try:
                        key = None if raw_key is None else deserialize_key(raw_key)
                        value = None if raw_value is None else deserialize_value(raw_value)
                    except Exception:
                        key, value = source.deserialize_checked(raw_key, raw_value)
                    if extract is not None:
                        ctx.timestamp = extract(key, value, ctx.timestamp)
                        if ctx.timestamp < 0:
                            raise InvalidTimestamp(f"the timestamp extractor returned {ctx.timestamp}")
                except Exception as exc:
                    dead_letter(exc, "deserialize", msg)
                else:
                    try:
                        forward(key, value)
                    except Exception as exc:
                        dead_letter(exc, dead_letter_stage(exc), msg)
                    if tracks_time and ctx.timestamp > self.stream_time:
                        self._advance_stream_time(ctx.timestamp)
                done = offset
                i += 1
        finally:
            if i > start:
                self.positions[topic] = done + 1
                self.processed_since_commit += i - start
        return i

    def _advance_stream_time(self, now: int) -> None:
        before, self.stream_time = self.stream_time, now
        for schedule in self.punctuations.due_on_stream_time(before, now):
            self._punctuate(schedule.callback, now)

    def punctuate_wall_clock(self, now_ms: int) -> None:
        """The worker loop's tick: fire the wall-clock punctuators whose interval boundary passed."""
        for schedule in self.punctuations.due_on_wall_clock(now_ms):
            self._punctuate(schedule.callback, now_ms)

    def _punctuate(self, callback: Callable[[int], None], at: int) -> None:
        """Run a punctuator under the current record's context (the sink gate decides on it) at time ``at``."""
        ctx = self.ctx
        saved, ctx.timestamp = ctx.timestamp, at
        try:
            callback(at)
        except Exception as exc:
            self._flush_error(exc)
        finally:
            ctx.timestamp = saved

    def commit_metadata(self) -> str:
        """What the task commits with its offsets: its stream time, when it keeps one."""
        return str(self.stream_time) if self._tracks_time and self.stream_time != NO_TIME else ""

    def resume_stream_time(self, metadata: str | None) -> None:
        """At assignment: the stream time the previous owner committed with these offsets."""
        if self._tracks_time and metadata and metadata.lstrip("-").isdigit():
            self.stream_time = self.committed_stream_time = max(self.stream_time, int(metadata))

    def _flush_error(self, exc: Exception) -> None:
        """A flushed cache entry failed downstream: dead-letter it under the record that last updated it."""
        ctx = self.ctx
        self._dead_letter(
            exc, dead_letter_stage(exc), _flushed_record(ctx.topic, ctx.partition, ctx.offset, ctx.timestamp)
        )

    def flush(self) -> None:
        """Before a commit: log and forward what the write cache holds."""
        for store in self.stores.values():
            store.flush()

    def commit_offsets(self) -> dict[str, int]:
        """Input positions to commit (only topics that moved since the last commit)."""
        return {t: o for t, o in self.positions.items() if self.committed.get(t) != o}

    def begin_commit(self) -> None:
        """After the flush: the commit covers everything up to here, and processing may go on.

        Records processed from now on belong to the next commit, though the exactly-once
        commit may still be waiting on the broker (``runtime/commit.py``): ``committed_ok``
        then persists only what this commit covers.
        """
        for store in self.stores.values():
            store.begin_commit()
        self._committing = (dict(self.positions), self.stream_time, self._oldest)
        self._oldest = None
        self.processed_since_commit = 0

    def committed_ok(self, checkpoints: dict[tuple[str, int], int]) -> None:
        """The commit begun last succeeded: persist its store updates with the changelog offsets now durable.

        A commit made in one step (at-least-once, a test) may skip ``begin_commit``: it
        then covers everything processed so far.
        """
        if self._committing is None:
            self.begin_commit()
        assert self._committing is not None
        for store in self.stores.values():
            store.commit(checkpoints.get((store.changelog_topic, self.partition)))
        positions, self.committed_stream_time, oldest = self._committing
        self.committed.update(positions)
        self._committing = None
        if oldest is not None and oldest > 0 and self._on_latency is not None:
            self._on_latency(max(0.0, time.time() - oldest / 1000))

    def rewind(self) -> dict[str, int]:
        """The commit failed: forget uncommitted work; returns where each input must be re-read from."""
        for store in self.stores.values():
            store.discard()
        self._committing = None
        self._oldest = None
        self.positions = dict(self.committed)
        self.stream_time = self.committed_stream_time
        self.processed_since_commit = 0
        return dict(self.committed)

    def close(self) -> None:
        for proc in self._custom:
            try:
                proc.user.close()
            except Exception:
                log.exception("a processor's close() failed", extra={"task": str(self.id)})
        for store in self.stores.values():
            store.discard()
        for kv in self.persistent.values():
            kv.close()


def _continues(msg: Message, topic: str | None, partition: int | None) -> bool:
    """Whether a record belongs to the run of ``topic`` and ``partition`` (``run_end``'s test)."""
    return msg.partition() == partition and msg.topic() == topic and msg.error() is None


def run_end(messages: Sequence[Message], start: int) -> int:
    """The index after the run that starts at ``start``: the records ``process_run`` would
    take (same topic and partition, no consumer error), for records the loop skips or holds."""
    first = messages[start]
    topic, partition = first.topic(), first.partition()
    i = start + 1
    while i < len(messages) and _continues(messages[i], topic, partition):
        i += 1
    return i


def _flushed_record(topic: str, partition: int, offset: int, timestamp: int) -> Record:
    """Stands in for the input record when a cache flush fails (no input bytes to dead-letter)."""
    return Record(topic, partition, offset, timestamp, None, None)
