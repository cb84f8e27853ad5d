"""Run a task without Kafka: plain messages in, a recording send function out (unit tests)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from baton import Topology
from baton.worker.naming import TaskId
from baton.worker.runtime.record import Message, Record
from baton.worker.runtime.task import Task
from baton.worker.state.stores import MemoryStore
from baton.worker.topology.context import Headers, RecordContext


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
) -> tuple[Task, Sent, Dead, dict[str, MemoryStore]]:
    built = topology.build()
    s = built.subtopologies[sub]
    if stores is None:  # a restarted task passes the stores of the one before
        stores = {n: MemoryStore() for n in [x.name for x in s.stores] + [t.store.name for t in s.tables]}
    sent, dead = Sent(), Dead()

    class Gate:
        def allows(self, topic: str, partition: int, offset: int) -> bool:
            return offset != 1  # a closed gate for one origin offset

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
    )
    return task, sent, dead, stores


class EveryThirdHeldBack:
    """A blue-green sink gate that reads the origin of each output record (an open gate does not)."""

    def allows(self, topic: str, partition: int, offset: int) -> bool:
        return offset % 3 != 1


class Recorded(list[tuple[str, int, str, str]]):
    """The dead-letter handler: stage, offset and the error as a user would read it."""

    def __call__(self, error: BaseException, stage: str, msg: Any) -> None:
        self.append((stage, msg.offset() or 0, type(error).__name__, str(error)))


def record_context(ctx: RecordContext) -> tuple[Any, ...]:
    """Every field of the record context: where a fast path must leave it, as the general path does."""
    return tuple(getattr(ctx, name) for name in RecordContext.__slots__)
