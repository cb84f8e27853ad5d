"""Interactive queries without a server: typed keys, routing, committed reads, the wire's endpoints."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from baton import JSON, LONG, STR, Json, Topology, Windowed, tumbling
from baton.worker.assignment.wire import Roles, Subscription
from baton.worker.naming import TaskId
from baton.worker.runtime.queries import (
    Answer,
    Placement,
    StoreReader,
    advertised,
    parse_key,
    partition_for,
    split_query,
)
from baton.worker.state.stores import MemoryStore
from baton.worker.topology.serdes import BYTES
from baton.worker.topology.windows import WindowedSerde

pytestmark = pytest.mark.unit


def test_keys_are_typed_by_the_store_serde() -> None:
    from pydantic import BaseModel

    class K(BaseModel):
        id: int

    assert parse_key(STR, "alice") == "alice"
    assert parse_key(LONG, "42") == 42
    assert parse_key(BYTES, "raw") == b"raw"
    assert parse_key(JSON, '{"a": 1}') == {"a": 1}
    assert parse_key(Json(K), '{"id": 3}') == K(id=3)
    with pytest.raises(ValueError):
        parse_key(LONG, "not a number")


def test_partitions_follow_the_java_partitioner() -> None:
    # Utils.toPositive(Utils.murmur2("alice".getBytes())) is 1951417749 in the Java client;
    # the integration test checks every key against where librdkafka's murmur2 put it
    assert partition_for(b"alice", 12) == 1951417749 % 12
    assert all(0 <= partition_for(f"u{i}".encode(), 7) < 7 for i in range(200))


def test_the_advertised_endpoint_gets_the_bound_port_unless_it_has_one() -> None:
    assert advertised(None, 8080) == "127.0.0.1:8080"
    assert advertised("pod-0.app-blue.ns.svc", 43123) == "pod-0.app-blue.ns.svc:43123"
    assert advertised("10.0.0.7:9000", 8080) == "10.0.0.7:9000"
    assert split_query("/stores/counts?key=a%20b&x=") == ("/stores/counts", {"key": "a b", "x": ""})


def test_endpoints_travel_in_the_group_protocol_user_data() -> None:
    sub = Subscription(process="p", host="h", endpoint="pod-0:8080")
    assert Subscription.decode(sub.encode()).endpoint == "pod-0:8080"
    assert Subscription.decode(Subscription(process="p", host="h").encode()).endpoint == ""  # older workers
    roles = Roles(
        endpoints={"pod-0:8080": frozenset({TaskId(0, 1)}), "pod-1:8080": frozenset({TaskId(0, 0)})}
    )
    assert Roles.decode(roles.encode()).endpoints == roles.endpoints


def _counter() -> Any:
    t = Topology()
    t.stream("clicks", key=STR, value=JSON).group_by_key().count(store="counts").to_stream().to("out")
    t.stream("views", key=STR).group_by_key().windowed_by(tumbling(10)).count(store="windowed")
    return t.build()


def _placement(local: dict[int, dict[bytes, bytes]], owners: dict[str, set[int]], **kw: Any) -> Placement:
    tasks = {}
    for partition, data in local.items():
        store = MemoryStore()
        store.write(data.items(), None)
        tasks[TaskId(0, partition)] = SimpleNamespace(persistent={"counts": store})
    return Placement(
        me="me:1",
        tasks=tasks,
        endpoints={e: frozenset(TaskId(0, p) for p in ps) for e, ps in owners.items()},
        partitions=lambda _topic: 4,
        **kw,
    )


def _ask(reader: StoreReader, target: str, where: Placement) -> Answer:
    path, params = split_query(target)
    return reader.answer(path, params, where)


def test_lookups_answer_here_redirect_to_the_owner_or_say_why_not() -> None:
    reader = StoreReader(_counter(), lambda t, _internal: t)
    here = {k: partition_for(k.encode(), 4) for k in ("alice", "bob", "carol", "dave", "erin")}
    mine = {p for p in here.values()} - {here["bob"]}
    where = _placement(
        {p: {k.encode(): str(i).encode() for i, (k, q) in enumerate(here.items()) if q == p} for p in mine},
        {"me:1": mine, "other:2": {here["bob"]}},
    )
    ok = _ask(reader, "/stores/counts?key=alice", where)
    assert (ok.status, ok.doc["key"], ok.doc["value"]) == (200, "alice", 0)
    moved = _ask(reader, "/stores/counts?key=bob", where)
    assert (moved.status, moved.location) == (307, "http://other:2/stores/counts?key=bob")
    absent = next(k for k in ("zed", "yan", "xia", "wu") if partition_for(k.encode(), 4) in mine)
    assert _ask(reader, f"/stores/counts?key={absent}", where).status == 404
    assert _ask(reader, "/stores/nope?key=a", where).status == 404
    assert _ask(reader, "/stores/windowed?from=a", where).status == 400  # windows are read by key
    assert _ask(reader, "/stores/counts", where).status == 400
    nobody = _placement({}, {}, restoring=frozenset({TaskId(0, here["alice"])}))
    unavailable = _ask(reader, "/stores/counts?key=alice", nobody)
    assert unavailable.status == 503 and "restoring" in unavailable.doc["error"]


def test_ranges_read_the_local_tasks_and_metadata_maps_the_group() -> None:
    reader = StoreReader(_counter(), lambda t, _internal: t)
    where = _placement(
        {0: {b"a": b"1", b"c": b"3"}, 2: {b"b": b"2", b"d": b"4"}}, {"me:1": {0, 2}, "x:9": {1, 3}}
    )
    got = _ask(reader, "/stores/counts?from=b&to=c", where)
    assert [(e["key"], e["value"]) for e in got.doc["entries"]] == [("b", 2), ("c", 3)]
    assert _ask(reader, "/stores/counts?from=a&limit=2", where).doc["truncated"] is True
    meta = _ask(reader, "/metadata/counts?key=alice", where)
    assert meta.doc["members"] == {"me:1": [0, 2], "x:9": [1, 3]}
    assert meta.doc["key"]["partition"] == partition_for(b"alice", 4)


def test_a_windowed_store_answers_a_keys_windows_in_a_time_range() -> None:
    reader = StoreReader(_counter(), lambda t, _internal: t)
    serde = WindowedSerde(STR, 10)
    partition = partition_for(b"u1", 4)
    rows = {
        serde.serialize(Windowed(k, start, start + 10)): str(n).encode()
        for k, start, n in (
            ("u1", 30, 3),
            ("u1", 10, 1),
            ("u10", 20, 9),
            ("u1", 20, 2),
        )
    }
    rows[b""] = b"\x00" * 8  # the stored stream time
    store = MemoryStore()
    store.write(rows.items(), None)
    where = Placement(
        me="me:1",
        tasks={TaskId(1, partition): SimpleNamespace(persistent={"windowed": store})},
        endpoints={"me:1": frozenset({TaskId(1, partition)})},
        partitions=lambda _topic: 4,
    )
    got = _ask(reader, "/stores/windowed?key=u1", where)
    assert got.status == 200 and [(w["start"], w["end"], w["value"]) for w in got.doc["windows"]] == [
        (10, 20, 1),
        (20, 30, 2),
        (30, 40, 3),
    ]
    narrowed = _ask(reader, "/stores/windowed?key=u1&from_time=15&to_time=30", where)
    assert [w["start"] for w in narrowed.doc["windows"]] == [20, 30]
    assert _ask(reader, "/metadata/windowed?key=u1", where).doc["key"]["partition"] == partition
