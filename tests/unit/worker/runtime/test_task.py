"""A task processes records through the topology with plain stores and a recording send function."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from baton import JSON, STR, Topology, tumbling
from baton.worker.naming import TaskId, tasks_for
from baton.worker.runtime.task import Task
from baton.worker.state.stores import MemoryStore
from baton.worker.state.task_store import ENTRY_OVERHEAD, MISSING, CacheBudget, TaskStore, entry_size
from baton.worker.topology.context import OpenGate, RecordContext
from baton.worker.topology.graph import StoreSpec
from tests.support.tasks import Dead, Msg, Sent, make_task

pytestmark = pytest.mark.unit


def counter() -> Topology:
    t = Topology()
    t.stream("clicks", key=STR, value=JSON).group_by_key().count(store="counts").to_stream().to("out")
    return t


def click(offset: int, user: str, value: Any = None) -> Msg:
    raw = orjson.dumps(value if value is not None else {"user_id": user})
    return Msg("clicks", offset, user.encode(), raw)


def test_cache_collapses_updates_until_flush_and_commit_persists_with_checkpoint() -> None:
    task, sent, _dead, stores = make_task(counter(), caching=True)
    for i, user in enumerate(["a", "b", "a", "a"]):
        task.process(click(i + 2, user))
    assert sent == []  # nothing leaves before the flush
    task.flush()
    assert sent.to("app-counts-changelog") == [(b"a", b"3"), (b"b", b"1")]
    assert sent.to("out") == [(b"a", b"3"), (b"b", b"1")]
    assert stores["counts"].get(b"a") is None  # not persisted before the commit succeeds
    assert task.commit_offsets() == {"clicks": 6}
    task.committed_ok({("app-counts-changelog", 0): 42})
    assert stores["counts"].get(b"a") == b"3" and stores["counts"].checkpoint() == 42
    assert task.commit_offsets() == {}


def test_without_cache_every_update_is_emitted_at_once() -> None:
    task, sent, _dead, _stores = make_task(counter(), caching=False)
    for i, user in enumerate(["a", "a", "b"]):
        task.process(click(i + 2, user))
    assert sent.to("out") == [(b"a", b"1"), (b"a", b"2"), (b"b", b"1")]


def test_rewind_drops_uncommitted_state() -> None:
    task, _sent, _dead, stores = make_task(counter(), caching=True)
    task.committed = {"clicks": 0}
    task.process(click(0, "a"))
    task.flush()
    task.committed_ok({})
    task.process(click(2, "a"))
    assert task.stores["counts"].get(b"a") == 2
    assert task.rewind() == {"clicks": 1}
    assert task.stores["counts"].get(b"a") == 1 and stores["counts"].get(b"a") == b"1"


def test_bad_records_go_to_the_dead_letter_handler_and_processing_continues() -> None:
    t = Topology()
    (
        t.stream("clicks", key=STR, value=JSON)
        .map_values(lambda v: 10 // v["n"])
        .group_by_key()
        .count(store="c")
        .to_stream()
        .to("out")
    )
    task, sent, dead, _stores = make_task(t, caching=False)
    task.process(Msg("clicks", 5, b"a", b"{bad"))
    task.process(Msg("clicks", 6, b"a", b'{"n": 0}'))
    task.process(Msg("clicks", 7, b"a", b'{"n": 2}'))
    assert dead == [("deserialize", 5), ("process", 6)]
    assert sent.to("out") == [(b"a", b"1")]
    assert task.positions == {"clicks": 8}


@pytest.mark.parametrize("fast", [False, True])  # the fast path hands these records to the general path
def test_a_bad_record_is_dead_lettered_with_the_serdes_own_error(fast: bool) -> None:
    """The per-record path calls the serdes' C functions (``fast_deserializer``), whose errors
    are not worded for users: a record that fails is dead-lettered with the serde's error."""
    errors: list[tuple[str, int, BaseException]] = []
    t = Topology()
    (
        t.stream("clicks", key=STR, value=JSON, timestamp=lambda _k, v, _ts: 1 // v["n"])
        .map_values(lambda v: v)
        .to("out")
    )
    built = t.build().subtopologies[0]
    task = Task(
        TaskId(0, 0),
        built,
        application_id="app",
        stores={},
        send=Sent(),
        gate=OpenGate(),
        caching=True,
        dead_letter=lambda error, stage, msg: errors.append((stage, msg.offset() or 0, error)),
        fuse_aggregations=fast,
    )
    assert (task._sources["clicks"].fused is None) is not fast
    task.process(Msg("clicks", 1, b"\xff", b'{"n": 1}'))
    task.process(Msg("clicks", 2, b"a", b"{bad"))
    task.process(Msg("clicks", 3, b"a", b'{"n": 0}'))
    assert [(stage, offset, type(e).__name__) for stage, offset, e in errors] == [
        ("deserialize", 1, "SerdeError"),
        ("deserialize", 2, "SerdeError"),
        ("deserialize", 3, "ZeroDivisionError"),  # the extractor's own error
    ]
    assert str(errors[0][2]).startswith("not UTF-8") and str(errors[1][2]).startswith("malformed JSON")


def test_what_the_serde_accepts_is_processed_though_its_c_function_refuses_it() -> None:
    """Regression: the compactor's replay reads keys and values from Spark as ``bytearray``,
    which ``bytes.decode`` (the string serde's fast path) refuses and ``StrSerde`` accepts;
    every replayed record was dead-lettered and the audit found every key unexpected."""
    for caching in (True, False):  # the fused loop and the general path
        task, _sent, dead, _stores = make_task(counter(), caching=caching)
        task.process(Msg("clicks", 0, bytearray(b"a"), bytearray(b'{"user_id": "a"}')))  # type: ignore[arg-type]
        task.process(Msg("clicks", 1, b"a", b'{"user_id": "a"}'))
        task.flush()
        assert dead == [], caching
        assert task.stores["counts"].get(b"a") == 2, caching


@pytest.mark.parametrize("in_place", [False, True], ids=["filtered", "changed-in-place"])
def test_a_repartition_topic_gets_a_json_value_as_the_steps_left_it(in_place: bool) -> None:
    """Behind filters and key selectors the fused chain forwards a JSON value's own bytes into
    the repartition topic (they decode alike); a dict that a ``map_values`` changed in place and
    returned is the same object with other content, and must arrive changed."""
    t = Topology()
    s = t.stream("clicks", key=STR, value=JSON).filter(lambda _k, v: v["n"] > 0)
    if in_place:
        s = s.map_values(lambda v: (v.__setitem__("seen", True), v)[1])
    s.group_by(lambda k, _v: k, key=STR, name="by").count(store="c")
    task, sent, dead, _ = make_task(t, caching=True)
    task.process_run([Msg("clicks", 0, b"a", b'{"n":  1}'), Msg("clicks", 1, b"b", b'{"n": 0}')], 0)
    assert dead == []
    assert sent.to("app-by-repartition") == [(b"a", b'{"n":1,"seen":true}' if in_place else b'{"n":  1}')]


def test_a_json_null_goes_into_a_repartition_topic_as_a_tombstone() -> None:
    """The count over the repartition topic takes its values as read and skips only a tombstone
    and b"null" (``own_json``): a null's own bytes (b" null") forwarded would be counted."""
    t = Topology()
    t.stream("clicks", key=STR, value=JSON).group_by(lambda k, _v: k, key=STR, name="by").count(store="c")
    task, sent, dead, _ = make_task(t, caching=True)
    task.process_run([Msg("clicks", 0, b"a", b" null"), Msg("clicks", 1, b"b", b'{"n": 1}')], 0)
    assert dead == []
    assert sent.to("app-by-repartition") == [(b"a", None), (b"b", b'{"n": 1}')]


@pytest.mark.parametrize("fused", [True, False])
def test_a_count_takes_its_own_repartition_topics_values_as_read(fused: bool) -> None:
    """Null and tombstone skipped, anything else counted, nothing dead-lettered: on the fused
    loop and on the general path alike (``own_json``)."""
    t = Topology()
    t.stream("clicks", key=STR, value=JSON).group_by(lambda k, _v: k, key=STR, name="by").count(store="c")
    task, sent, dead, _ = make_task(t, caching=True, sub=1, fuse_aggregations=fused)
    values = [b"null", None, b"{bad", b'{"n": 1}', b"[]"]
    task.process_run([Msg("app-by-repartition", i, b"a", v) for i, v in enumerate(values)], 0)
    task.flush()
    assert dead == []
    assert sent.to("app-c-changelog")[-1] == (b"a", b"3")


def test_sink_gate_silences_sinks_but_not_changelogs() -> None:
    task, sent, _dead, _stores = make_task(counter(), caching=False)
    task.process(click(1, "a"))  # origin offset 1: gate closed
    task.process(click(2, "a"))
    assert sent.to("out") == [(b"a", b"2")]
    assert sent.to("app-counts-changelog") == [(b"a", b"1"), (b"a", b"2")]


def test_windowed_count_per_window() -> None:
    t = Topology()
    (
        t.stream("clicks", key=STR, value=JSON)
        .group_by_key()
        .windowed_by(tumbling(10))
        .count(store="w")
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.start}", n))
        .to("out", key=STR)
    )
    task, sent, _dead, _stores = make_task(t, caching=True)
    for offset, ts in enumerate([1, 5, 12, 9, 25]):
        task.process(Msg("clicks", offset, b"a", b"{}", ts))
    task.flush()
    assert dict(sent.to("out")) == {b"a@0": b"3", b"a@10": b"1", b"a@20": b"1"}


def test_stream_table_join_reads_the_table_store() -> None:
    t = Topology()
    users = t.table("users", key=STR, value=JSON, store="users")
    stream = t.stream("clicks", key=STR, value=JSON)
    stream.join(users, lambda c, u: {"n": c["n"], "name": u["name"]}).to("inner")
    stream.left_join(users, lambda c, u: u).to("left")
    task, sent, _dead, stores = make_task(t, caching=True)
    stores["users"].write([(b"a", b'{"name": "Alice"}')], 1)
    task.process(Msg("clicks", 0, b"a", b'{"n": 1}'))
    task.process(Msg("clicks", 2, b"b", b'{"n": 2}'))
    assert sent.to("inner") == [(b"a", b'{"n":1,"name":"Alice"}')]
    assert sent.to("left") == [(b"a", b'{"name":"Alice"}'), (b"b", None)]


def test_a_repartition_record_carries_no_header_and_is_its_own_origin_downstream() -> None:
    """A topology that repartitions refuses flips, so no gate needs the input record's origin
    (context.py): the repartition record goes without a header, and one of an earlier version
    that has it is read as its own origin all the same."""
    t = Topology()
    t.stream("orders", key=STR, value=JSON).group_by(lambda _k, v: v["c"], key=STR, name="by-c").count(
        store="n"
    )
    upstream, sent, _dead, _stores = make_task(t, caching=True, sub=0)
    upstream.process(Msg("orders", 9, b"o1", b'{"c": "x"}'))
    [(topic, key, value, _p, headers)] = sent
    assert (topic, key, headers) == ("app-by-c-repartition", b"x", None)
    downstream, sent2, _dead2, _stores2 = make_task(t, caching=False, sub=1)
    downstream.process(Msg("app-by-c-repartition", 4, key, value, 0, [("baton.origin", b"0:9:orders")]))
    assert (downstream.ctx.topic, downstream.ctx.offset) == ("app-by-c-repartition", 4)
    assert sent2.to("app-n-changelog") == [(b"x", b"1")]


def test_task_store_reads_overlay_then_persistent() -> None:
    persistent = MemoryStore()
    persistent.write([(b"k", b"7")], 3)
    sent = Sent()
    store = TaskStore(
        spec=StoreSpec("s", STR, JSON),
        persistent=persistent,
        changelog_topic="cl",
        partition=0,
        send=sent,
        ctx=RecordContext(),
        caching=True,
    )
    assert store.get(b"k") == 7 and store.get(b"zz") is MISSING
    store.put(b"k", "k", 8)
    assert store.get(b"k") == 8
    store.discard()
    assert store.get(b"k") == 7


def test_tasks_group_partitions_by_subtopology() -> None:
    tasks = tasks_for([("a", 1), ("b", 1), ("a", 0), ("r", 0)], {"a": 0, "b": 0, "r": 1})
    assert tasks == {TaskId(0, 0): [("a", 0)], TaskId(0, 1): [("a", 1), ("b", 1)], TaskId(1, 0): [("r", 0)]}
    assert str(TaskId(1, 3)) == "1_3" and TaskId.parse("1_3") == TaskId(1, 3)


def deleting_counter() -> Topology:
    """Counts per user; a click with ``{"reset": true}`` deletes the user's count."""
    t = Topology()
    (
        t.stream("clicks", key=STR, value=JSON)
        .group_by_key()
        .aggregate(lambda: 0, lambda _k, v, n: None if v.get("reset") else n + 1, store="counts")
        .to_stream()
        .to("out")
    )
    return t


@pytest.mark.parametrize("caching", [False, True])
def test_an_aggregator_returning_none_deletes_the_key(caching: bool) -> None:
    """As in Kafka Streams: a tombstone in the changelog and downstream; the count restarts."""
    task, sent, _dead, stores = make_task(deleting_counter(), caching=caching)
    task.process(click(0, "a"))
    task.process(click(1, "a"))
    task.flush()
    task.committed_ok({("app-counts-changelog", 0): 2})
    assert stores["counts"].get(b"a") == b"2"
    task.process(click(2, "a", {"user_id": "a", "reset": True}))
    assert task.stores["counts"].get(b"a") is MISSING
    task.flush()
    assert sent.to("app-counts-changelog")[-1] == (b"a", None) and sent.to("out")[-1] == (b"a", None)
    task.committed_ok({("app-counts-changelog", 0): 3})
    assert stores["counts"].get(b"a") is None
    task.process(click(3, "a"))
    task.flush()
    assert sent.to("out")[-1] == (b"a", b"1")


def test_null_values_and_null_keys_are_not_folded_into_aggregates() -> None:
    """Kafka Streams skips them in count/aggregate/reduce; Baton used to count tombstones."""
    task, sent, dead, _stores = make_task(counter(), caching=False)
    task.process(click(2, "a"))
    task.process(Msg("clicks", 3, b"a", None))  # a tombstone on the stream
    task.process(Msg("clicks", 4, None, orjson.dumps({"user_id": "nobody"})))
    task.process(click(5, "a"))
    assert sent.to("out") == [(b"a", b"1"), (b"a", b"2")]
    assert dead == []
    assert task.commit_offsets() == {"clicks": 6}  # skipped records are still consumed


def test_a_full_write_cache_flushes_the_store_written_to_and_gives_its_bytes_back() -> None:
    """cache.max.bytes.buffering: a put over the worker-wide budget flushes at once, mid-interval."""
    built = counter().build()
    sub = built.subtopologies[0]
    budget = CacheBudget(2 * entry_size(b"a", 1) + 10)  # two dirty keys fit, a third does not
    sent = Sent()
    task = Task(
        TaskId(0, 0),
        sub,
        application_id="app",
        stores={"counts": MemoryStore()},
        send=sent,
        gate=OpenGate(),
        caching=True,
        dead_letter=Dead(),
        cache_budget=budget,
    )
    for i, user in enumerate(["a", "b", "a", "a", "b"]):
        task.process(click(i, user))
    assert sent == [] and budget.used == 2 * entry_size(b"a", 1)  # updates of dirty keys cost nothing more
    task.process(click(5, "c"))  # over the budget: the store flushes, this update included
    assert sent.to("out") == [(b"a", b"3"), (b"b", b"2"), (b"c", b"1")]
    assert budget.used == 0
    task.process(click(6, "a"))
    assert budget.used == entry_size(b"a", 4)
    task.rewind()  # an aborted transaction drops the dirty entries and their bytes
    assert budget.used == 0


def test_entry_sizes_count_keys_values_and_an_overhead() -> None:
    assert entry_size(b"key", b"12345") == 3 + 5 + ENTRY_OVERHEAD
    assert entry_size(b"k", 7) == 1 + 8 + ENTRY_OVERHEAD
    assert entry_size(b"k", {"a": 1}) > entry_size(b"k", 7)


class _Polled(Msg):
    """A consumed record of a given partition, or a consumer error in the batch."""

    def __init__(self, partition: int, offset: int, user: str, error: str | None = None) -> None:
        super().__init__("clicks", offset, user.encode(), orjson.dumps({"user_id": user}))
        self._partition, self._error = partition, error

    def partition(self) -> int | None:
        return self._partition

    def error(self) -> Any:
        return self._error


def test_a_run_ends_at_another_partition_or_a_consumer_error_and_counts_what_it_processed() -> None:
    task, sent, _dead, _stores = make_task(counter(), caching=False)
    batch = [_Polled(0, 4, "a"), _Polled(0, 5, "b"), _Polled(1, 9, "a"), _Polled(0, 6, "a")]
    assert task.process_run(batch, 0) == 2  # the partition changes at index 2
    assert task.positions == {"clicks": 6} and task.processed_since_commit == 2
    assert sent.to("out") == [(b"a", b"1"), (b"b", b"1")]
    assert task.process_run(batch, 3) == 4
    assert task.process_run([_Polled(0, 7, "a"), _Polled(0, 8, "a", error="broker down")], 0) == 1
    assert task.positions == {"clicks": 8} and task.processed_since_commit == 4
    assert task.process_run(batch, 0, end=1) == 1  # an end bound stops it too


def test_a_run_keeps_the_records_before_one_whose_dead_letter_handler_stops_the_worker() -> None:
    t = Topology()
    t.stream("clicks", key=STR, value=JSON).group_by_key().count(store="c").to_stream().to("out")
    built = t.build()

    class Stop(Exception):
        pass

    def fail(_error: BaseException, _stage: str, _msg: Any) -> None:
        raise Stop  # the "fail" handler: the worker stops at this record

    sent = Sent()
    task = Task(
        TaskId(0, 0),
        built.subtopologies[0],
        application_id="app",
        stores={"c": MemoryStore()},
        send=sent,
        gate=OpenGate(),
        caching=False,
        dead_letter=fail,
    )
    batch = [_Polled(0, 10, "a"), _Polled(0, 11, "b"), Msg("clicks", 12, b"c", b"{bad"), _Polled(0, 13, "d")]
    with pytest.raises(Stop):
        task.process_run(batch)
    # the two records before the bad one are processed and will be committed; the bad one is not
    assert task.positions == {"clicks": 12} and task.processed_since_commit == 2
    assert sent.to("out") == [(b"a", b"1"), (b"b", b"1")]
