"""Windows that close: grace, retention, final results, sessions, and stream time that survives a restart."""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from datetime import timedelta

import pytest

from baton import JSON, STR, Topology, TopologyError, hopping, sessions, tumbling, until_window_closes
from baton.worker.runtime.processors.windowed import STREAM_TIME_KEY
from baton.worker.runtime.window_index import WindowIndex
from baton.worker.state.stores import MemoryStore
from baton.worker.topology.windows import SessionWindowedSerde, SessionWindows, TimeWindows, Windowed
from tests.support.tasks import Msg, make_task

pytestmark = pytest.mark.unit

CHANGELOG = "app-w-changelog"


def test_grace_and_retention_decide_when_a_window_closes_and_leaves() -> None:
    w = tumbling(10, grace=5)
    assert (w.close_at(20), w.expire_at(20)) == (35, 35)  # retention defaults to size + grace
    assert tumbling(10, grace=5, retention=100).expire_at(20) == 120
    assert hopping(timedelta(seconds=10), timedelta(seconds=5)).grace_ms == 24 * 3600 * 1000
    with pytest.raises(ValueError, match="shorter than size \\+ grace"):
        tumbling(10, grace=5, retention=14)
    with pytest.raises(ValueError, match="negative"):
        tumbling(10, grace=-1)
    s = sessions(30, grace=0)
    assert (s.close_at(100), s.expire_at(100)) == (130, 130)
    with pytest.raises(ValueError, match="gap"):
        sessions(0)


def test_session_keys_have_kafka_streams_layout() -> None:
    serde = SessionWindowedSerde(STR)
    raw = serde.serialize(Windowed("bo", 5, 9))
    assert raw == b"bo" + struct.pack(">qq", 9, 5)  # key, end, start
    assert serde.deserialize(raw) == Windowed("bo", 5, 9)


def test_window_index_reports_each_close_once_in_order_and_forgets_removed_windows() -> None:
    index = WindowIndex()
    index.add(b"b", "b", 20, 30)
    index.add(b"a", "a", 10, 30)
    index.add(b"a", "a", 99, 99)  # already tracked: times never change
    index.add(b"c", "c", 15, 15)
    index.remove(b"c")
    assert index.pop_closed(9) == []
    assert index.pop_closed(25) == [(b"a", "a"), (b"b", "b")]
    assert index.pop_closed(25) == []
    assert index.is_closed(b"a")
    assert index.pop_expired(30) == [(b"a", "a"), (b"b", "b")]
    assert len(index) == 0


def _counts(
    windows: TimeWindows | SessionWindows, *, final: bool, label: Callable[[Windowed[str]], str]
) -> Topology:
    """Counts per window, written as ``label(window) -> count``, with or without suppress."""
    t = Topology()
    table = t.stream("clicks", key=STR, value=JSON).group_by_key().windowed_by(windows).count(store="w")
    if final:
        table = table.suppress(until_window_closes())
    table.to_stream().map(lambda w, n: (label(w), n)).to("out", key=STR)
    return t


def _tumbling_counts(*, final: bool, grace: int = 5) -> Topology:
    return _counts(tumbling(10, grace=grace), final=final, label=lambda w: f"{w.key}@{w.start}")


def _run(task_events: list[tuple[str, int]], topology: Topology, caching: bool) -> list[tuple[bytes, bytes]]:
    task, sent, _dead, _stores = make_task(topology, caching=caching)
    for offset, (key, ts) in enumerate(task_events, start=10):
        task.process(Msg("clicks", offset, key.encode(), b"{}", ts))
    task.flush()
    return [(k, v) for k, v in sent.to("out") if k is not None and v is not None]


@pytest.mark.parametrize("caching", [True, False])
def test_a_late_record_is_dropped_and_never_reopens_a_closed_window(caching: bool) -> None:
    late: list[int] = []
    task, sent, _dead, stores = make_task(
        _tumbling_counts(final=False), caching=caching, on_late=lambda: late.append(1)
    )
    events = [("a", 1), ("a", 4), ("a", 14), ("a", 3), ("a", 15), ("a", 2)]  # 15 closes [0,10) (10 + 5)
    for offset, (key, ts) in enumerate(events, start=10):
        task.process(Msg("clicks", offset, key.encode(), b"{}", ts))
    task.flush()
    assert dict(sent.to("out")) == {b"a@0": b"3", b"a@10": b"2"}  # ts 2 arrived after the close
    assert late == [1]
    # [0,10) expired at stream time 15: a tombstone in the changelog, nothing forwarded for it
    assert (b"a" + struct.pack(">q", 0), None) in sent.to(CHANGELOG)
    task.committed_ok({})
    assert stores["w"].get(b"a" + struct.pack(">q", 0)) is None
    assert stores["w"].get(b"a" + struct.pack(">q", 10)) == b"2"
    assert stores["w"].get(STREAM_TIME_KEY) == struct.pack(">q", 15)


@pytest.mark.parametrize("caching", [True, False])
def test_suppress_emits_each_window_once_with_its_final_value(caching: bool) -> None:
    events = [("a", 1), ("b", 2), ("a", 9), ("a", 12), ("b", 14), ("a", 3), ("a", 15), ("b", 30)]
    out = _run(events, _tumbling_counts(final=True), caching)
    # [0,10) closes at 15: a has 3 (ts 1, 9, 3), b 1; [10,20) closes at 25: a 2, b 1; [30,40) stays open
    assert out == [(b"a@0", b"3"), (b"b@0", b"1"), (b"a@10", b"2"), (b"b@10", b"1")]


def test_suppress_needs_a_windowed_table_and_comes_before_to_stream() -> None:
    t = Topology()
    grouped = t.stream("clicks", key=STR).group_by_key()
    with pytest.raises(TopologyError, match="windowed"):
        grouped.count(store="plain").suppress(until_window_closes())
    table = grouped.windowed_by(tumbling(10)).count(store="w")
    table.to_stream().to("out")
    with pytest.raises(TopologyError, match="before to_stream"):
        table.suppress(until_window_closes())
    with pytest.raises(TopologyError, match="merger"):
        grouped.windowed_by(sessions(10)).aggregate(lambda: 0, lambda k, v, a: a + 1, store="s")


@pytest.mark.parametrize("caching", [True, False])
@pytest.mark.parametrize("final", [True, False])
def test_a_restart_at_any_commit_gives_the_output_of_an_uninterrupted_run(caching: bool, final: bool) -> None:
    """Stream time is state: a task restarted from its committed store drops, closes and emits the same."""
    rng = random.Random(5)
    events = [(f"k{rng.randrange(3)}", rng.randrange(0, 200)) for _ in range(120)]
    events.sort(key=lambda e: e[1] + rng.randrange(-30, 30))  # mostly in order, some late
    topology = _tumbling_counts(final=final, grace=8)
    whole = _final_values(_run(events, topology, caching))
    for cut in (1, 17, 60, 119):
        task, sent, _dead, stores = make_task(topology, caching=caching)
        for offset, (key, ts) in enumerate(events[:cut], start=10):
            task.process(Msg("clicks", offset, key.encode(), b"{}", ts))
        task.flush()
        task.committed_ok({})  # then the process dies: a memory store keeps what was committed
        again, sent_again, _dead, _ = make_task(topology, caching=caching, stores=stores)
        for offset, (key, ts) in enumerate(events[cut:], start=10 + cut):
            again.process(Msg("clicks", offset, key.encode(), b"{}", ts))
        again.flush()
        out = [*sent.to("out"), *sent_again.to("out")]
        assert _final_values([(k, v) for k, v in out if k and v]) == whole, cut
        if final:  # every window once: nothing re-emitted after the restart
            keys = [k for k, _ in out]
            assert len(keys) == len(set(keys)), cut


def test_an_aborted_transaction_rewinds_stream_time_with_the_store() -> None:
    topology = _tumbling_counts(final=True, grace=0)
    task, sent, _dead, _stores = make_task(topology, caching=True)
    task.process(Msg("clicks", 10, b"a", b"{}", 5))
    task.flush()
    task.committed_ok({})
    task.process(Msg("clicks", 11, b"a", b"{}", 50))  # closes [0,10): emitted in the open transaction
    assert sent.to("out") == [(b"a@0", b"1")]
    task.rewind()  # the transaction aborted: stream time is 5 again
    task.process(Msg("clicks", 11, b"a", b"{}", 7))  # not late any more
    task.process(Msg("clicks", 12, b"a", b"{}", 50))
    assert sent.to("out")[1:] == [(b"a@0", b"2")]


def _sessions(final: bool, grace: int = 0) -> Topology:
    return _counts(sessions(10, grace=grace), final=final, label=lambda w: f"{w.key}@{w.start}-{w.end}")


def test_sessions_extend_bridge_and_tombstone_what_they_merge() -> None:
    events = [("a", 0), ("a", 5), ("a", 30), ("a", 20), ("a", 100)]
    out = _run(events, _sessions(final=False), caching=False)
    assert out == [
        (b"a@0-0", b"1"),
        (b"a@0-5", b"2"),
        (b"a@30-30", b"1"),
        (b"a@20-30", b"2"),  # 20 is within 10 of 30 but not of 5: joins the later session only
        (b"a@100-100", b"1"),
    ]
    # bridging takes a record out of order, within the grace period of the older session
    task, sent, _dead, _stores = make_task(_sessions(final=False, grace=50), caching=False)
    for offset, ts in enumerate([0, 20, 10], start=10):  # 10 bridges [0,0] and [20,20]
        task.process(Msg("clicks", offset, b"a", b"{}", ts))
    assert sent.to("out")[-3:] == [(b"a@0-0", None), (b"a@20-20", None), (b"a@0-20", b"3")]


def test_final_sessions_come_out_once_and_a_closed_session_never_changes() -> None:
    late: list[int] = []
    task, sent, _dead, _stores = make_task(
        _sessions(final=True), caching=True, on_late=lambda: late.append(1)
    )
    for offset, (key, ts) in enumerate(
        [("a", 0), ("a", 4), ("b", 3), ("a", 15), ("b", 40), ("a", 2), ("a", 35), ("b", 80)], start=10
    ):
        task.process(Msg("clicks", offset, key.encode(), b"{}", ts))
    task.flush()
    # b@[3,3] closes at 13 and a@[0,4] at 14 (4 + gap 10): ts 15 starts a new session;
    # ts 2 arrives at stream time 40: late; a@[15,15] closed at 25; a@[35,35] at 45; b@[40,40] at 50
    assert sent.to("out") == [
        (b"b@3-3", b"1"),  # both close when stream time jumps to 15: in order of closing
        (b"a@0-4", b"2"),
        (b"a@15-15", b"1"),
        (b"a@35-35", b"1"),
        (b"b@40-40", b"1"),
    ]
    assert late == [1]


def _final_values(out: list[tuple[bytes, bytes]]) -> dict[bytes, bytes]:
    return dict(out)


def test_restored_stream_time_is_read_from_the_store() -> None:
    stores = {"w": MemoryStore()}
    stores["w"].write([(STREAM_TIME_KEY, struct.pack(">q", 1000))], 1)
    task, sent, _dead, _ = make_task(_tumbling_counts(final=False), caching=False, stores=stores)
    task.process(Msg("clicks", 10, b"a", b"{}", 20))  # window [20,30) closed at 35 long ago
    assert sent.to("out") == []


def test_the_timestamp_extractor_gives_event_time_and_bad_times_go_to_the_dead_letter_topic() -> None:
    t = Topology()
    (
        t.stream("clicks", key=STR, value=JSON, timestamp=lambda _k, v, ts: v.get("at", ts))
        .group_by_key()
        .windowed_by(tumbling(10, grace=0))
        .count(store="w")
        .suppress(until_window_closes())
        .to_stream()
        .map(lambda w, n: (f"{w.key}@{w.start}", n))
        .to("out", key=STR)
    )
    task, sent, dead, _stores = make_task(t, caching=True)
    task.process(Msg("clicks", 10, b"a", b'{"at": 3}', ts=999))
    task.process(Msg("clicks", 11, b"a", b'{"at": -5}', ts=999))  # negative: dead-lettered
    task.process(Msg("clicks", 12, b"a", b'{"at": 5}', ts=999))
    task.process(Msg("clicks", 13, b"a", b"{}", ts=12))  # no field: the record's own timestamp
    assert sent.to("out") == [(b"a@0", b"2")]
    assert dead == [("deserialize", 11)]
