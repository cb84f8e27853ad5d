"""``TopologyTestDriver``: a topology run in-process, without a broker, record by record.

Kafka Streams' ``TopologyTestDriver`` for Baton. It runs the worker's own ``Task`` objects
(one per sub-topology and partition, built as ``Worker._build_task`` builds them, over
``MemoryStore``s), so what a test sees is what the worker computes: same processors, same
stores and write cache, same fused aggregation loop when it applies, same dead letters.
Only Kafka is simulated:

* **Topics** are in-memory logs. A record piped in is processed to completion before
  ``pipe`` returns: what its task sends to a topic another sub-topology reads (a
  repartition topic, a through-topic, a processed table's topic), or to a table's or a
  global table's topic, is delivered to that reader, in the order sent, until nothing is
  left in flight. Nothing runs on another thread, so nothing needs waiting for.
* **Partitions**: one per topic by default; with ``partitions=N`` every topic has N and
  keys go where the Java client's default partitioner (murmur2, as Baton's producers)
  puts them, so co-partitioning and repartitioning behave as on a cluster.
* **Commits**: by default after every piped record, as Kafka Streams' driver does; with
  ``commit_interval_ms`` when the wall clock passes the interval (``advance_wall_clock``)
  or on ``commit()``. A commit flushes the write caches (off by default: every update is
  emitted, like Kafka Streams' driver with a cache size of 0) and persists the stores.
* **Time**: stream time follows record timestamps (windows close, with their grace, when
  it passes them; stream-time punctuators fire); the wall clock stands still until
  ``advance_wall_clock`` moves it, which fires wall-clock punctuators.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from baton.testing.stores import KeyValueView, PartitionStore, WindowStoreView
from baton.testing.topics import TestInputTopic, TestOutputTopic
from baton.worker.config import ErrorHandler
from baton.worker.naming import TaskId, dlq_topic, internal_topic, source_topics
from baton.worker.runtime.dead_letters import (
    HEADER_ERROR,
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_STAGE,
    HEADER_TOPIC,
    DeadLetters,
)
from baton.worker.runtime.metrics import Metrics
from baton.worker.runtime.queries import partition_for
from baton.worker.runtime.record import Record
from baton.worker.runtime.task import Task
from baton.worker.state.stores import KeyValueStore, MemoryStore
from baton.worker.state.task_store import CacheBudget
from baton.worker.topology.context import Headers, OpenGate
from baton.worker.topology.dsl import Topology
from baton.worker.topology.graph import BuiltTopology, SinkNode, SourceNode, StoreSpec, reachable
from baton.worker.topology.loader import load
from baton.worker.topology.serdes import Serde
from baton.worker.topology.windows import SessionWindowedSerde, WindowedSerde

DEFAULT_CACHE_BYTES = 10 * 1024 * 1024  # the worker's default cache.max.bytes.buffering


@dataclass(frozen=True)
class DeadLetter:
    """A record the topology could not deserialize or process, as the dead-letter topic got it."""

    topic: str
    partition: int
    offset: int
    stage: str  # "deserialize" or "process"
    error: str  # "<ExceptionType>: <message>"
    key: bytes | None
    value: bytes | None
    timestamp: int


class TopologyTestDriver:
    """Runs ``topology`` in this process; use it as a context manager, or ``close()`` it.

    ``topology``: a ``Topology``, a built one, or what ``baton run`` takes
    (``examples/click_counter.py``, ``myapp.streams:topology``).
    ``caching``: the write cache, off by default so every update is emitted.
    ``commit_interval_ms``: ``None`` commits after every piped record; a number commits
    when the wall clock passes each multiple of it.
    ``partitions``: how many partitions every topic has (one task per sub-topology each).
    ``on_error``: ``"dlq"`` sends bad records to the dead-letter topic and goes on,
    ``"fail"`` raises ``RecordFailed`` out of ``pipe``.
    """

    def __init__(
        self,
        topology: Topology | BuiltTopology | str | Path,
        *,
        application_id: str = "baton-test",
        partitions: int = 1,
        caching: bool = False,
        cache_max_bytes: int = DEFAULT_CACHE_BYTES,
        commit_interval_ms: int | None = None,
        wall_clock_ms: int = 0,
        on_error: str = "dlq",
    ) -> None:
        if partitions < 1:
            raise ValueError("a topic has at least one partition")
        if isinstance(topology, Topology):
            topology = topology.build()
        elif not isinstance(topology, BuiltTopology):
            topology = load(str(topology))
        self.topology, self.application_id, self.partitions = topology, application_id, partitions
        self.wall_clock_ms = wall_clock_ms
        self.late_records = 0  # records that came after their window closed (grace included)
        self._commit_interval = commit_interval_ms
        self._logs: dict[str, list[Record]] = {}  # every topic written to, in the order written
        self._next_offset: dict[tuple[str, int], int] = {}
        self._in_flight: deque[Record] = deque()
        self._topic_to_sub = source_topics(topology, application_id)
        self._dlq_topic = dlq_topic(application_id)
        dead_letters = DeadLetters(
            ErrorHandler(on_error), self._dlq_topic, self.send, Metrics(application_id)
        )
        self._globals: dict[str, KeyValueStore] = {
            g.store.name: MemoryStore() for g in topology.global_tables
        }
        budget = CacheBudget(cache_max_bytes)  # all tasks' caches together, as in a worker
        self._tasks: dict[TaskId, Task] = {}
        for sub in topology.subtopologies:
            names = [s.name for s in sub.stores] + [t.store.name for t in sub.tables]
            for partition in range(partitions):
                task_id = TaskId(sub.index, partition)
                self._tasks[task_id] = Task(
                    task_id,
                    sub,
                    application_id=application_id,
                    stores={name: MemoryStore() for name in names},
                    send=self.send,
                    gate=OpenGate(),
                    caching=caching,
                    dead_letter=dead_letters,
                    cache_budget=budget,
                    on_late=self._late,
                    global_stores=self._globals,
                )
        for task in self._tasks.values():
            task.punctuate_wall_clock(wall_clock_ms)  # the wall clock starts here
        self._drain()  # what the processors' init forwarded
        # a topic read by a table the task looks up (not processed) or by a global table
        self._tailed: dict[str, list[tuple[str, int]]] = {}  # topic -> (store, sub-topology)
        for sub in topology.subtopologies:
            for table in sub.tables:
                self._tailed.setdefault(table.store.source_topic or "", []).append(
                    (table.store.name, sub.index)
                )
        self._global_topics = {g.store.source_topic or "": g.store.name for g in topology.global_tables}

    # -- topics ------------------------------------------------------------------------------------
    def input_topic(
        self, topic: str, key_serde: Serde[Any] | None = None, value_serde: Serde[Any] | None = None
    ) -> TestInputTopic:
        """A topic the topology reads, with the serdes it reads it with (or those given)."""
        found = self._reader_serdes(topic)
        if found is None and (key_serde is None or value_serde is None):
            raise KeyError(f"the topology reads no topic {topic!r}; give serdes to write to it anyway")
        key = key_serde or found[0]  # type: ignore[index]
        value = value_serde or found[1]  # type: ignore[index]
        return TestInputTopic(self, topic, key, value)

    def output_topic(
        self,
        topic: str,
        key_serde: Serde[Any] | None = None,
        value_serde: Serde[Any] | None = None,
        *,
        raw: bool = False,
    ) -> TestOutputTopic:
        """A topic the topology writes, decoded with its sink's serdes (or those given; ``raw``: bytes).

        A topic no sink writes (a changelog, the dead-letter topic) is read as bytes unless
        serdes are given. Each output topic object reads from the topic's start."""
        sink = None if raw else self._sink_serdes(topic)
        key = key_serde or (sink[0] if sink else None)
        value = value_serde or (sink[1] if sink else None)
        return TestOutputTopic(self._logs.setdefault(topic, []), topic, key, value)

    def pipe_raw(  # noqa: PLR0917 - one record's parts
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None:
        """Write one serialized record to ``topic`` and process it, and all it causes, to completion."""
        at = self.wall_clock_ms if timestamp is None else timestamp
        partition, offset = self._place(topic, key, partition)
        self._in_flight.append(Record(topic, partition, offset, at, key, value, headers))
        self._drain()
        if self._commit_interval is None:
            self.commit()

    def send(  # noqa: PLR0917 - context.Send: what every task writes through
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: int,
        headers: Headers | None,
    ) -> None:
        """The tasks' producer: log the record; if anything reads its topic, deliver it next."""
        partition, offset = self._place(topic, key, partition)
        record = Record(topic, partition, offset, timestamp, key, value, headers)
        self._logs.setdefault(topic, []).append(record)
        if topic in self._topic_to_sub or topic in self._tailed or topic in self._global_topics:
            self._in_flight.append(record)

    def _place(self, topic: str, key: bytes | None, partition: int | None) -> tuple[int, int]:
        """The partition and offset of the next record of ``topic`` with ``key``.

        No partition given: the default partitioner's, by key; a null key goes to the first."""
        if partition is None:
            partition = 0 if key is None else partition_for(key, self.partitions)
        offset = self._next_offset.get((topic, partition), 0)
        self._next_offset[topic, partition] = offset + 1
        return partition, offset

    def _drain(self) -> None:
        """Deliver records in flight, in the order written, until none is left."""
        while self._in_flight:
            self._deliver(self._in_flight.popleft())

    def _deliver(self, record: Record) -> None:
        topic, partition, key = record.topic() or "", record.partition() or 0, record.key()
        if key is not None:  # tables' topics: what the worker's restore thread tails
            for store, sub in self._tailed.get(topic, ()):
                self._tasks[TaskId(sub, partition)].persistent[store].write([(key, record.value())], None)
            if topic in self._global_topics:
                self._globals[self._global_topics[topic]].write([(key, record.value())], None)
        sub_index = self._topic_to_sub.get(topic)
        if sub_index is not None:
            self._tasks[TaskId(sub_index, partition)].process(record)

    # -- time and commits --------------------------------------------------------------------------
    def advance_wall_clock(self, ms: int) -> None:
        """Move the wall clock on: wall-clock punctuators fire, and a commit is made if one is due."""
        before = self.wall_clock_ms
        self.wall_clock_ms += ms
        for task in self._tasks.values():
            task.punctuate_wall_clock(self.wall_clock_ms)
            self._drain()
        interval = self._commit_interval
        if interval is None or self.wall_clock_ms // interval > before // interval:
            self.commit()

    def commit(self) -> None:
        """Every task's commit: flush the write caches (delivering what they emit) and persist the stores."""
        while True:
            for task in self._tasks.values():
                task.flush()
            if not self._in_flight:
                break
            self._drain()  # what was flushed dirtied caches downstream: flush again
        for task in self._tasks.values():
            task.committed_ok({})

    def _late(self) -> None:
        self.late_records += 1

    # -- what the topology holds -------------------------------------------------------------------
    def key_value_store(self, name: str) -> KeyValueView:
        """A key-value store, a table's store or a global table's, by name."""
        spec, parts = self._store(name)
        if isinstance(spec.key_serde, WindowedSerde | SessionWindowedSerde):
            raise TypeError(f"store {name!r} is windowed: read it with window_store()")
        if name in self._globals:
            return KeyValueView(name, parts, spec.key_serde, spec.value_serde, lambda _key: 0)
        return KeyValueView(name, parts, spec.key_serde, spec.value_serde)

    def window_store(self, name: str) -> WindowStoreView:
        """A windowed or session aggregation's store, by name."""
        spec, parts = self._store(name)
        if not isinstance(spec.key_serde, WindowedSerde | SessionWindowedSerde):
            raise TypeError(f"store {name!r} is not windowed: read it with key_value_store()")
        return WindowStoreView(name, parts, spec.key_serde, spec.value_serde)

    def _store(self, name: str) -> tuple[StoreSpec, dict[int, PartitionStore]]:
        for glob in self.topology.global_tables:
            if glob.store.name == name:
                return glob.store, {0: self._globals[name]}
        for sub in self.topology.subtopologies:
            for spec in sub.stores:
                if spec.name == name:
                    return spec, {
                        p: self._tasks[TaskId(sub.index, p)].stores[name] for p in range(self.partitions)
                    }
            for table in sub.tables:
                if table.store.name == name:
                    tasks = [self._tasks[TaskId(sub.index, p)] for p in range(self.partitions)]
                    return table.store, {t.partition: t.persistent[name] for t in tasks}
        raise KeyError(f"no store named {name!r}")

    def dead_letters(self) -> list[DeadLetter]:
        """Every record sent to the dead-letter topic so far, with where it came from and why."""
        out = []
        for record in self._logs.get(self._dlq_topic, []):
            headers = {k: v.decode() if isinstance(v, bytes) else v or "" for k, v in record.headers() or ()}
            out.append(
                DeadLetter(
                    topic=headers[HEADER_TOPIC],
                    partition=int(headers[HEADER_PARTITION]),
                    offset=int(headers[HEADER_OFFSET]),
                    stage=headers[HEADER_STAGE],
                    error=headers[HEADER_ERROR],
                    key=record.key(),
                    value=record.value(),
                    timestamp=record.timestamp()[1],
                )
            )
        return out

    def produced_topics(self) -> list[str]:
        """Every topic the topology wrote to, changelogs and repartition topics included."""
        return sorted(t for t, records in self._logs.items() if records)

    def internal_topic(self, suffix: str) -> str:
        """The full name of a repartition topic (``<application_id>-<suffix>``)."""
        return internal_topic(self.application_id, suffix)

    # -- serdes of topics --------------------------------------------------------------------------
    def _nodes(self) -> Iterator[Any]:
        for sub in self.topology.subtopologies:
            yield from reachable(list(sub.sources))

    def _reader_serdes(self, topic: str) -> tuple[Serde[Any], Serde[Any]] | None:
        for sub in self.topology.subtopologies:
            for source in sub.sources:
                if isinstance(source, SourceNode) and not source.internal and topic in source.topics:
                    return source.key_serde, source.value_serde
        tables = [t.store for sub in self.topology.subtopologies for t in sub.tables]
        for spec in tables + [g.store for g in self.topology.global_tables]:
            if spec.source_topic == topic:
                return spec.key_serde, spec.value_serde
        return None

    def _sink_serdes(self, topic: str) -> tuple[Serde[Any], Serde[Any]] | None:
        for node in self._nodes():
            if isinstance(node, SinkNode) and not node.internal and node.topic == topic:
                return node.key_serde, node.value_serde
        return None

    # -- lifecycle ---------------------------------------------------------------------------------
    def close(self) -> None:
        """Close every task: custom processors' ``close()`` runs, stores are dropped."""
        for task in self._tasks.values():
            task.close()
        self._tasks.clear()

    def __enter__(self) -> TopologyTestDriver:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
