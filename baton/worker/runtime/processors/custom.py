"""Custom processors: a user's ``baton.Processor`` (Kafka Streams' Processor API) as a node of the tree.

The user's class sees its stores as objects (``_StoreView``) and the task through a
``ProcessorContext`` (``_Context``): forward, schedule punctuators, the record's metadata.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from baton.worker.runtime.processors.base import Build, Factory, ProcessorNode
from baton.worker.runtime.punctuation import Punctuations, Schedule
from baton.worker.state.task_store import MISSING, TaskStore
from baton.worker.topology.context import RecordContext
from baton.worker.topology.custom import PunctuationType
from baton.worker.topology.graph import CustomNode, Node


class _StoreView:
    """A declared store as a custom processor sees it: objects in, objects out."""

    __slots__ = ("_key", "_store")

    def __init__(self, store: TaskStore) -> None:
        self._store = store
        self._key = store.spec.key_serde.serialize

    def get(self, key: Any) -> Any:
        value = self._store.get(self._key(key))
        return None if value is MISSING else value

    def put(self, key: Any, value: Any) -> None:
        self._store.put(self._key(key), key, value)

    def delete(self, key: Any) -> None:
        self._store.put(self._key(key), key, None)


class _Context:
    """``ProcessorContext`` for one custom processor of one task."""

    __slots__ = ("_ctx", "_processor", "_punctuations", "_stores", "_stream_time")

    def __init__(
        self,
        processor: ProcessorNode,
        stores: dict[str, _StoreView],
        ctx: RecordContext,
        punctuations: Punctuations,
        stream_time: Callable[[], int],
    ) -> None:
        self._processor = processor
        self._stores = stores
        self._ctx = ctx
        self._punctuations = punctuations
        self._stream_time = stream_time

    def forward(self, key: Any, value: Any) -> None:
        self._processor.forward(key, value)

    def store(self, name: str) -> _StoreView:
        try:
            return self._stores[name]
        except KeyError:
            raise KeyError(f"store {name!r} is not one this processor named in process(stores=...)") from None

    def schedule(
        self, interval: int | timedelta, kind: PunctuationType, callback: Callable[[int], None]
    ) -> Schedule:
        ms = int(interval.total_seconds() * 1000) if isinstance(interval, timedelta) else int(interval)
        return self._punctuations.add(ms, kind, callback)

    @property
    def topic(self) -> str:
        return self._ctx.topic

    @property
    def partition(self) -> int:
        return self._ctx.partition

    @property
    def offset(self) -> int:
        return self._ctx.offset

    @property
    def timestamp(self) -> int:
        return self._ctx.timestamp

    @property
    def stream_time(self) -> int:
        return self._stream_time()


class CustomProcessor(ProcessorNode):
    """Runs a user's ``baton.Processor``; its stores never forward (only ``context.forward`` does)."""

    __slots__ = ("context", "initialized", "user")

    def __init__(
        self,
        node: CustomNode,
        stores: dict[str, TaskStore],
        ctx: RecordContext,
        punctuations: Punctuations,
        stream_time: Callable[[], int],
    ) -> None:
        super().__init__()
        self.user = node.factory()
        views = {spec.name: _StoreView(stores[spec.name]) for spec in node.stores}
        self.context = _Context(self, views, ctx, punctuations, stream_time)
        self.initialized = False

    def connect(self, children: list[ProcessorNode]) -> None:
        super().connect(children)
        if not self.initialized:  # after connect: init may already forward or schedule
            self.initialized = True
            self.user.init(self.context)

    def process(self, key: Any, value: Any) -> None:
        self.user.process(key, value)


def _custom(node: CustomNode, build: Build) -> ProcessorNode:
    assert build.punctuations is not None, "a task with custom processors keeps their punctuators"
    return CustomProcessor(node, build.stores, build.ctx, build.punctuations, build.stream_time)


FACTORIES: dict[type[Node], Factory] = {CustomNode: _custom}
