"""Interactive queries: read a named store over HTTP on any pod (Kafka Streams' interactive queries).

    GET /stores/<store>?key=<key>            one key: 200 {"key", "value"}, 404 if absent,
                                             307 to the member that owns it
    GET /stores/<store>?from=<a>&to=<b>      a key range of the tasks active here
                                             (serialized-key order, ``limit`` 1000 by default)
    GET /metadata/<store>[?key=<key>]        which member serves which partitions, and the
                                             partition and owner of ``key``

Reads see committed state only: the stores' persistent part (RocksDB or memory), never the
uncommitted updates of the open transaction, so a query never shows a count that a crash
would take back. Keys are typed with the store's key serde (``STR`` as is, ``LONG`` as a
number, JSON and models as JSON) and hashed as the producers partition them
(murmur2, the Java client's partitioner, which Baton's producers use too).

Stores belong to the processing thread, which may close them on a rebalance at any
moment; the HTTP thread therefore never touches one. It queues the request and the
processing loop answers it between two polls (``Queries.answer``), a few milliseconds.
"""

from __future__ import annotations

import queue
import urllib.parse
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, field
from typing import Any

import orjson
from kafka.partitioner.default import murmur2
from pydantic import BaseModel

from baton.worker.naming import TaskId
from baton.worker.state.stores import KeyValueStore
from baton.worker.topology.graph import AggregateNode, BuiltTopology, StreamJoinNode, SubTopology, reachable
from baton.worker.topology.serdes import BytesSerde, JsonSerde, LongSerde, ModelSerde, Serde, StrSerde
from baton.worker.topology.windows import SessionWindowedSerde, WindowedSerde

RANGE_LIMIT = 1000


@dataclass(frozen=True)
class Answer:
    status: int
    doc: Mapping[str, Any]
    location: str | None = None

    def body(self) -> bytes:
        return orjson.dumps(self.doc, default=_jsonable)


def _jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    return str(value)


def partition_for(key_bytes: bytes, partitions: int) -> int:
    """The partition the Java client's default partitioner (and Baton's producers) put a key in."""
    return int((murmur2(key_bytes) & 0x7FFFFFFF) % partitions)


def parse_key(serde: Serde[Any], text: str) -> Any:
    """A key from a URL, typed as the store's key serde wants it."""
    if isinstance(serde, StrSerde):
        return text
    if isinstance(serde, LongSerde):
        return int(text)
    if isinstance(serde, BytesSerde):
        return text.encode()
    if isinstance(serde, JsonSerde):
        return orjson.loads(text)
    if isinstance(serde, ModelSerde):
        return serde.model.model_validate_json(text)
    return serde.deserialize(text.encode())  # a user serde: the key's own text form


class QueryError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.answer = Answer(status, {"error": message})


@dataclass
class Placement:
    """What the processing thread knows when it answers: its tasks, the group's routing, topic sizes."""

    me: str
    tasks: Mapping[TaskId, Any]  # TaskId -> Task, active and done restoring
    endpoints: Mapping[str, frozenset[TaskId]]
    partitions: Callable[[str], int]
    restoring: frozenset[TaskId] = field(default_factory=frozenset)

    def owner(self, task: TaskId) -> str | None:
        for endpoint, tasks in self.endpoints.items():
            if task in tasks:
                return endpoint
        return None


class StoreReader:
    """Answers one query from a ``Placement`` (runs on the processing thread)."""

    def __init__(self, topology: BuiltTopology, topic_name: Callable[[str, bool], str]) -> None:
        self._subs: dict[str, tuple[SubTopology, Serde[Any], Serde[Any]]] = {}
        self._topic_name = topic_name
        for sub in topology.subtopologies:
            nodes = reachable(list(sub.sources))
            buffers = {  # record buffers (stream-stream joins, sliding windows) are not tables anyone reads
                s.name for n in nodes if isinstance(n, StreamJoinNode) for s in (n.left_store, n.right_store)
            } | {n.buffer.name for n in nodes if isinstance(n, AggregateNode) and n.buffer is not None}
            for spec in [*sub.stores, *(t.store for t in sub.tables)]:
                if spec.name not in buffers:
                    self._subs[spec.name] = (sub, spec.key_serde, spec.value_serde)

    def answer(self, path: str, params: Mapping[str, str], where: Placement) -> Answer:
        try:
            kind, _, store = path.strip("/").partition("/")
            if kind not in ("stores", "metadata") or not store or "/" in store:
                raise QueryError(404, "use /stores/<store>?key=... or ?from=...&to=..., or /metadata/<store>")
            if store not in self._subs:
                raise QueryError(404, f"no store named {store!r}; stores: {sorted(self._subs)}")
            sub, key_serde, value_serde = self._subs[store]
            windowed = key_serde if isinstance(key_serde, WindowedSerde | SessionWindowedSerde) else None
            partitions = where.partitions(self._topic_name(sub.sources[0].topics[0], sub.sources[0].internal))
            if kind == "metadata":  # windows live where their key does
                route = key_serde if windowed is None else windowed.inner
                return self._metadata(store, sub, route, params, partitions, where)
            if "key" in params:
                return self._get(store, path, sub, key_serde, value_serde, params, partitions, where)
            if windowed is not None:
                raise QueryError(
                    400,
                    f"store {store!r} is windowed: give ?key=<key>, and &from_time=&to_time= (ms) to narrow",
                )
            if "from" in params or "to" in params:
                return self._range(store, sub, key_serde, value_serde, params, where)
            raise QueryError(400, "give ?key=<key>, or ?from=<key>&to=<key> for a range")
        except QueryError as exc:
            return exc.answer
        except (ValueError, TypeError) as exc:
            return Answer(400, {"error": f"bad key: {exc}"})

    def _key_bytes(self, key_serde: Serde[Any], text: str) -> tuple[Any, bytes]:
        key = parse_key(key_serde, text)
        return key, key_serde.serialize(key)

    def _get(  # noqa: PLR0917 - one request's parts
        self,
        store: str,
        path: str,
        sub: SubTopology,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        params: Mapping[str, str],
        partitions: int,
        where: Placement,
    ) -> Answer:
        windowed = key_serde if isinstance(key_serde, WindowedSerde | SessionWindowedSerde) else None
        key, key_bytes = self._key_bytes(key_serde if windowed is None else windowed.inner, params["key"])
        task_id = TaskId(sub.index, partition_for(key_bytes, partitions))
        task = where.tasks.get(task_id)
        if task is None:
            owner = where.owner(task_id)
            if owner is not None and owner != where.me:
                query = urllib.parse.urlencode(params)
                return Answer(307, {"owner": owner}, location=f"http://{owner}{path}?{query}")
            state = (
                "is restoring here" if task_id in where.restoring else "has no owner right now (rebalancing)"
            )
            raise QueryError(503, f"task {task_id} {state}; retry shortly")
        if windowed is not None:
            return self._windows(
                _persistent(task, store), key, key_bytes, windowed, value_serde, params, task_id
            )
        raw = _persistent(task, store).get(key_bytes)
        if raw is None:
            return Answer(404, {"key": key, "error": "no such key", "task": str(task_id)})
        return Answer(200, {"key": key, "value": value_serde.deserialize(raw), "task": str(task_id)})

    def _windows(  # noqa: PLR0917 - one request's parts
        self,
        kv: KeyValueStore,
        key: Any,
        key_bytes: bytes,
        windowed: WindowedSerde[Any] | SessionWindowedSerde[Any],
        value_serde: Serde[Any],
        params: Mapping[str, str],
        task_id: TaskId,
    ) -> Answer:
        """A key's windows (sessions) whose start is within ``from_time``..``to_time``, by start:
        Kafka Streams' ``WindowStore.fetch(key, from, to)``. Committed windows only."""
        low, high = int(params.get("from_time", -(2**63))), int(params.get("to_time", 2**63 - 1))
        limit = int(params.get("limit", RANGE_LIMIT))
        windows = []
        # a key's windows are its bytes followed by 8 or 16 bytes of times; a longer key with the
        # same prefix sorts among them, so each entry's key is checked
        for raw_key, raw in kv.range(key_bytes, key_bytes + b"\xff" * 17, 2**31):
            if len(raw_key) <= len(key_bytes):  # the stored stream time's empty key, among others
                continue
            window = windowed.deserialize(raw_key)
            if window.key == key and low <= window.start <= high:
                windows.append(
                    {"start": window.start, "end": window.end, "value": value_serde.deserialize(raw)}
                )
        windows.sort(key=lambda w: (w["start"], w["end"]))
        doc = {
            "key": key,
            "windows": windows[:limit],
            "task": str(task_id),
            "truncated": len(windows) > limit,
        }
        return Answer(200, doc)

    def _range(  # noqa: PLR0917 - one request's parts
        self,
        store: str,
        sub: SubTopology,
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        params: Mapping[str, str],
        where: Placement,
    ) -> Answer:
        low = self._key_bytes(key_serde, params["from"])[1] if "from" in params else None
        high = self._key_bytes(key_serde, params["to"])[1] if "to" in params else None
        limit = int(params.get("limit", RANGE_LIMIT))
        found: list[tuple[bytes, bytes]] = []
        for task_id in sorted(t for t in where.tasks if t.subtopology == sub.index):
            found.extend(_persistent(where.tasks[task_id], store).range(low, high, limit))
        found.sort()
        entries = [
            {"key": key_serde.deserialize(k), "value": value_serde.deserialize(v)} for k, v in found[:limit]
        ]
        tasks = sorted(str(t) for t in where.tasks if t.subtopology == sub.index)
        return Answer(200, {"entries": entries, "tasks": tasks, "truncated": len(found) > limit})

    def _metadata(  # noqa: PLR0917 - one request's parts
        self,
        store: str,
        sub: SubTopology,
        key_serde: Serde[Any],
        params: Mapping[str, str],
        partitions: int,
        where: Placement,
    ) -> Answer:
        members = {
            endpoint: sorted(t.partition for t in tasks if t.subtopology == sub.index)
            for endpoint, tasks in sorted(where.endpoints.items())
        }
        doc: dict[str, Any] = {"store": store, "partitions": partitions, "members": members, "me": where.me}
        if "key" in params:
            key, key_bytes = self._key_bytes(key_serde, params["key"])
            task_id = TaskId(sub.index, partition_for(key_bytes, partitions))
            doc["key"] = {"key": key, "partition": task_id.partition, "owner": where.owner(task_id)}
        return Answer(200, doc)


def _persistent(task: Any, store: str) -> KeyValueStore:
    stores: Mapping[str, KeyValueStore] = task.persistent
    return stores[store]


class Queries:
    """The hand-over between the HTTP thread (``ask``) and the processing thread (``answer``)."""

    def __init__(self) -> None:
        self._pending: queue.Queue[tuple[str, dict[str, str], Future[Answer]]] = queue.Queue()

    def ask(self, path: str, params: dict[str, str], timeout: float = 10.0) -> Answer:
        future: Future[Answer] = Future()
        self._pending.put((path, params, future))
        try:
            return future.result(timeout)
        except FutureTimeout:
            return Answer(503, {"error": "the worker is busy (a rebalance or a flip); retry shortly"})

    def answer(self, resolve: Callable[[str, dict[str, str]], Answer]) -> None:
        while True:
            try:
                path, params, future = self._pending.get_nowait()
            except queue.Empty:
                return
            try:
                future.set_result(resolve(path, params))
            except Exception as exc:  # a bug or a closed store: the client hears of it, the worker goes on
                future.set_result(Answer(500, {"error": f"{type(exc).__name__}: {exc}"}))


def advertised(application_server: str | None, port: int) -> str:
    """This process's ``host:port`` for routing: the configured host, the bound port unless given."""
    host = application_server or "127.0.0.1"
    return host if ":" in host.rsplit("]", 1)[-1] else f"{host}:{port}"


def split_query(target: str) -> tuple[str, dict[str, str]]:
    """``/stores/x?key=a`` -> (``/stores/x``, {"key": "a"})."""
    url = urllib.parse.urlsplit(target)
    return url.path, dict(urllib.parse.parse_qsl(url.query, keep_blank_values=True))


def is_query(path: str) -> bool:
    return path.startswith(("/stores/", "/metadata/"))
