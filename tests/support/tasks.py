"""Run a task without Kafka: plain messages in, a recording send function out (unit tests); and
the harness of the model checks that hold a fast path to the general path (``TwoPaths``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import Message as KafkaMessage
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from baton import Topology
from baton.worker.naming import TaskId
from baton.worker.runtime.fused_chain import FusedChain
from baton.worker.runtime.record import Message, Record
from baton.worker.runtime.task import Task
from baton.worker.state.stores import MemoryStore
from baton.worker.state.task_store import CacheBudget, entry_size
from baton.worker.topology.context import Headers, RecordContext, SinkGate
from baton.worker.topology.graph import SubTopology


class Msg(Record):
    """A partition-0 record, arguments in the order these tests write them."""

    def __init__(  # noqa: PLR0917 - mirrors a Kafka record
        self,
        topic: str,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        ts: int = 0,
        headers: Headers | None = None,
    ) -> None:
        super().__init__(topic, 0, offset, ts, key, value, headers)


class Sent(list[tuple[str, bytes | None, bytes | None, int | None, Headers | None]]):
    def __init__(self) -> None:
        super().__init__()
        self.timestamps: list[int] = []  # of each record, in the same order

    def __call__(  # noqa: PLR0917 - implements context.Send
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: int,
        headers: Headers | None,
    ) -> None:
        self.append((topic, key, value, partition, headers))
        self.timestamps.append(timestamp)

    def to(self, topic: str) -> list[tuple[bytes | None, bytes | None]]:
        return [(k, v) for t, k, v, _p, _h in self if t == topic]


class Dead(list[tuple[str, int]]):
    def __call__(self, error: BaseException, stage: str, msg: Message) -> None:
        self.append((stage, msg.offset() or 0))


def make_task(
    topology: Topology,
    caching: bool,
    sub: int = 0,
    stores: dict[str, MemoryStore] | None = None,
    on_late: Callable[[], None] = lambda: None,
    *,
    global_stores: dict[str, MemoryStore] | None = None,
    fuse_aggregations: bool = True,
) -> tuple[Task, Sent, Dead, dict[str, MemoryStore]]:
    built = topology.build()
    s = built.subtopologies[sub]
    if stores is None:  # a restarted task passes the stores of the one before
        stores = {n: MemoryStore() for n in [x.name for x in s.stores] + [t.store.name for t in s.tables]}
    sent, dead = Sent(), Dead()

    class Gate:
        def allows(self, topic: str, partition: int, offset: int) -> bool:
            return offset != 1  # a closed gate for one input offset

    task = Task(
        TaskId(sub, 0),
        s,
        application_id="app",
        stores=dict(stores),
        send=sent,
        gate=Gate(),
        caching=caching,
        dead_letter=dead,
        on_late=on_late,
        global_stores=global_stores,
        fuse_aggregations=fuse_aggregations,
    )
    return task, sent, dead, stores


class EveryThirdHeldBack:
    """A blue-green sink gate that reads the input position of each output record (an open gate does not)."""

    def allows(self, topic: str, partition: int, offset: int) -> bool:
        return offset % 3 != 1


class Recorded(list[tuple[str, int, str, str]]):
    """The dead-letter handler: stage, offset and the error as a user would read it."""

    def __call__(self, error: BaseException, stage: str, msg: Any) -> None:
        self.append((stage, msg.offset() or 0, type(error).__name__, str(error)))


def record_context(ctx: RecordContext) -> tuple[Any, ...]:
    """Every field of the record context: where a fast path must leave it, as the general path does."""
    return tuple(getattr(ctx, name) for name in RecordContext.__slots__)


class TwoPaths(RuleBasedStateMachine):
    """The model checks of a fast path: two tasks of one sub-topology, one with its fast path and
    one without (``Task(fuse_aggregations=False)``, the general path it stands in for), the same
    records, flushes, commits and aborts, and after every step the same of everything the runtime
    and the user can see. The fused loop's model (test_fused_model.py) and the fast paths' models
    (test_fast_path_models.py) differ only in the topologies and records they build."""

    keys: list[bytes | None]
    values: list[bytes | None]
    topics: list[str]

    def setup(
        self,
        sub: SubTopology,
        *,
        gate: SinkGate,
        tables: Callable[[], dict[str, MemoryStore]] = dict,
        budget_key: bytes = b"a" + bytes(8),
        fast: type = FusedChain,
        fused: list[str] | None = None,
    ) -> None:
        """``tables``: the tailed tables' stores for one task; ``budget_key``: the write cache holds
        two entries of a key this long, so a third key flushes in the middle of a run; ``fast``: the
        loop the fast task must take; ``fused``: the topics with a fast path (all)."""
        self.sides: list[tuple[Task, Sent, Recorded, dict[str, MemoryStore]]] = []
        self.late = [0, 0]  # records dropped as late, per side (a metric)
        for side, fast_path in enumerate((True, False)):
            sent, dead = Sent(), Recorded()
            stores = {spec.name: MemoryStore() for spec in sub.stores} | tables()
            task = Task(
                TaskId(sub.index, 0),
                sub,
                application_id="app",
                stores=dict(stores),
                send=sent,
                gate=gate,
                caching=True,
                dead_letter=dead,
                cache_budget=CacheBudget(2 * entry_size(budget_key, 10) + 5),
                fuse_aggregations=fast_path,
                on_late=lambda side=side: self._late(side),  # type: ignore[misc]
            )
            self.sides.append((task, sent, dead, stores))
        self.topics = self.sides[0][0].input_topics
        self.offsets = dict.fromkeys(self.topics, 0)
        fast_task, general_task = self.sides[0][0], self.sides[1][0]
        assert all(
            isinstance(fast_task._sources[t].fused, fast) and general_task._sources[t].fused is None
            for t in (self.topics if fused is None else fused)
        ), "the model compares the fast path with the general path"

    def _late(self, side: int) -> None:
        self.late[side] += 1

    def message(
        self, topic: str, key: int, value: int, timestamp: int, headers: Headers | None, *, replayed: bool
    ) -> KafkaMessage:
        """The next record of ``topic``: ``self.keys[key]``, ``self.values[value]``; ``replayed``:
        key and value as ``bytearray``, as the compactor's replay hands them in."""
        offset = self.offsets[topic]
        self.offsets[topic] += 1
        raw_key, raw_value = self.keys[key], self.values[value]
        if replayed:  # the stubs say bytes; the runtime must take what the replay hands it
            raw_key = None if raw_key is None else bytearray(raw_key)  # type: ignore[assignment]
            raw_value = None if raw_value is None else bytearray(raw_value)  # type: ignore[assignment]
        return KafkaMessage(
            topic=topic,
            partition=0,
            offset=offset,
            key=raw_key,
            value=raw_value,
            timestamp=(1, timestamp),
            headers=headers,
        )

    def feed(
        self,
        records: list[tuple[int, int, int, Headers | None]],
        start: int,
        topic: int = 0,
        *,
        replayed: bool = False,
    ) -> None:
        """Records (key, value, timestamp, headers) of one topic through both tasks."""
        name = self.topics[topic % len(self.topics)]
        self.run(
            [self.message(name, k, v, ts, headers, replayed=replayed) for k, v, ts, headers in records], start
        )

    def run(self, messages: list[KafkaMessage], start: int) -> None:
        """Both tasks process ``messages`` from ``start`` (the loop may hand a task the middle of a
        batch), each call of ``process_run`` to where it stops; both must stop at the same places."""
        start = min(start, len(messages) - 1)
        stops = []
        for task, *_ in self.sides:
            i, seen = start, []
            while i < len(messages):
                i = task.process_run(messages, i, len(messages))
                seen.append(i)
            stops.append(seen)
        assert stops[0] == stops[1]

    @rule()
    def flush(self) -> None:
        for task, *_ in self.sides:
            task.flush()

    @rule()
    def commit(self) -> None:
        for task, *_ in self.sides:
            task.flush()
            task.committed_ok({(store.changelog_topic, 0): 7 for store in task.stores.values()})

    @rule()
    def abort(self) -> None:
        assert self.sides[0][0].rewind() == self.sides[1][0].rewind()

    def alike(self, sent: Sent) -> list[Any]:
        """What of the sent records both paths must agree on: all of it, unless a model says less."""
        return list(sent)

    def store_keys(self) -> list[bytes]:
        """Keys whose value both tasks' stores must agree on (besides what the stores hold)."""
        return []

    @invariant()
    def both_paths_agree(self) -> None:
        (fast, f_sent, f_dead, f_stores), (general, g_sent, g_dead, g_stores) = self.sides
        assert self.alike(f_sent) == self.alike(g_sent)
        assert f_sent.timestamps == g_sent.timestamps
        assert f_dead == g_dead
        assert self.late[0] == self.late[1]
        for name, store in f_stores.items():
            assert list(store.items()) == list(g_stores[name].items()), name
        for name, view in fast.stores.items():
            for key in self.store_keys():
                assert view.get(key) == general.stores[name].get(key), (name, key)
        assert fast.positions == general.positions
        assert fast.processed_since_commit == general.processed_since_commit
        assert record_context(fast.ctx) == record_context(general.ctx)
