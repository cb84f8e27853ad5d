"""Windowed stream-stream joins: partners within the window, unmatched records once the window closed."""

from __future__ import annotations

import random

import pytest

from baton import JSON, STR, Topology, TopologyError, within
from baton.worker.runtime.task import Task
from tests.support.tasks import Msg, make_task

pytestmark = pytest.mark.unit


def _join(how: str, grace: int = 0) -> Topology:
    t = Topology()
    clicks = t.stream("clicks", key=STR, value=JSON)
    views = t.stream("views", key=STR, value=JSON)
    joined = {
        "inner": clicks.join,
        "left": clicks.left_join,
        "outer": clicks.outer_join,
    }[how](views, lambda c, v: {"c": c and c["n"], "v": v and v["n"]}, windows=within(10, grace=grace))
    joined.to("out", key=STR, value=JSON)
    return t


def _feed(task: Task, events: list[tuple[str, str, int, int]], start: int = 10) -> None:
    for offset, (topic, key, n, ts) in enumerate(events, start=start):
        task.process(Msg(topic, offset, key.encode(), f'{{"n": {n}}}'.encode(), ts))


EVENTS = [
    ("clicks", "a", 1, 100),
    ("views", "a", 2, 105),  # within 10 of click 1: joins
    ("views", "b", 3, 106),  # no click for b
    ("clicks", "a", 4, 130),  # view 2 is 25 away: no partner yet
    ("views", "a", 5, 125),  # joins click 4 (5 apart), not click 1 (25 apart)
    ("clicks", "c", 6, 200),  # stream time 200: everything up to 190 has closed
]


@pytest.mark.parametrize(
    ("how", "expected"),
    [
        ("inner", [b'{"c":1,"v":2}', b'{"c":4,"v":5}']),
        ("left", [b'{"c":1,"v":2}', b'{"c":4,"v":5}']),  # every click found a view
        # view b@106 has no partner: out when stream time passes 116 (at the click at 130)
        ("outer", [b'{"c":1,"v":2}', b'{"c":null,"v":3}', b'{"c":4,"v":5}']),
    ],
)
def test_partners_within_the_window_and_unmatched_records_after_it(how: str, expected: list[bytes]) -> None:
    task, sent, _dead, _stores = make_task(_join(how), caching=True)
    _feed(task, EVENTS)
    task.flush()
    assert [v for _k, v in sent.to("out")] == expected


def test_a_left_join_emits_an_unmatched_record_once_and_only_after_its_window_closed() -> None:
    task, sent, _dead, _stores = make_task(_join("left"), caching=False)
    _feed(task, [("clicks", "a", 1, 100), ("clicks", "b", 2, 108)])
    assert sent.to("out") == []  # the click may still meet a view until stream time 110
    _feed(task, [("views", "a", 9, 150)], start=20)  # too late for click 1, and it closes its window
    assert sent.to("out") == [(b"a", b'{"c":1,"v":null}'), (b"b", b'{"c":2,"v":null}')]
    _feed(task, [("clicks", "z", 3, 300)], start=30)  # a left join never emits a lonely view
    assert len(sent.to("out")) == 2
    late: list[int] = []
    task2, sent2, _dead, _ = make_task(_join("inner"), caching=False, on_late=lambda: late.append(1))
    _feed(task2, [("clicks", "a", 1, 100), ("clicks", "a", 2, 200), ("views", "a", 3, 101)])
    assert sent2.to("out") == [] and late == [1]  # the view came after the click's window closed


def test_a_late_record_of_a_keeping_side_is_emitted_at_once_unmatched() -> None:
    """Kafka Streams' KStreamKStreamJoin: past window + grace, a left (outer: either) record
    without partners goes out as (record, None) at once instead of being dropped."""
    late: list[int] = []
    task, sent, _dead, _ = make_task(_join("left", grace=5), caching=False, on_late=lambda: late.append(1))
    _feed(task, [("clicks", "a", 1, 200), ("clicks", "b", 2, 100)])  # 100 + 10 + 5 <= 200: late
    assert sent.to("out") == [(b"b", b'{"c":2,"v":null}')] and late == []
    _feed(task, [("views", "b", 3, 101)], start=20)  # the late click was not buffered: no join now
    assert sent.to("out") == [(b"b", b'{"c":2,"v":null}')] and late == [1]  # a left join's late view drops
    outer, sent_o, _dead, _ = make_task(_join("outer"), caching=False)
    _feed(outer, [("clicks", "a", 1, 200), ("views", "b", 3, 50)])
    assert sent_o.to("out") == [(b"b", b'{"c":null,"v":3}')]


def test_a_late_record_still_joins_the_partners_buffered_now() -> None:
    task, sent, _dead, _ = make_task(_join("left", grace=0), caching=False)
    # view a@195 is buffered until stream time passes 205; click a@190 is late at stream time 201
    _feed(task, [("views", "a", 7, 195), ("clicks", "z", 1, 201), ("clicks", "a", 2, 190)])
    assert sent.to("out") == [(b"a", b'{"c":2,"v":7}')]


def test_a_restart_at_any_commit_joins_like_an_uninterrupted_run() -> None:
    rng = random.Random(3)
    events = [
        (rng.choice(["clicks", "views"]), f"k{rng.randrange(4)}", i, 10 * i + rng.randrange(-15, 15))
        for i in range(150)
    ]
    for how in ("inner", "left", "outer"):
        topology = _join(how, grace=20)
        whole, sent, _dead, _ = make_task(topology, caching=False)
        _feed(whole, events)
        for cut in (3, 40, 99, 149):
            task, first, _dead, stores = make_task(topology, caching=False)
            _feed(task, events[:cut])
            task.flush()
            task.committed_ok({})  # then the process dies; the memory stores keep what was committed
            again, second, _dead, _ = make_task(topology, caching=False, stores=stores)
            _feed(again, events[cut:], start=10 + cut)
            assert first.to("out") + second.to("out") == sent.to("out"), (how, cut)


def test_stream_joins_need_windows_and_unchanged_keys() -> None:
    t = Topology()
    a, b = t.stream("a", key=STR), t.stream("b", key=STR)
    with pytest.raises(TopologyError, match="within"):
        a.join(b, lambda x, y: x)
    with pytest.raises(TopologyError, match="repartition"):
        a.map(lambda k, v: (v, k)).join(b, lambda x, y: x, windows=within(5))
    a.join(b, lambda x, y: x, windows=within(5), name="ab").to("out")
    (sub,) = t.build().subtopologies
    assert sorted(s.name for s in sub.stores) == ["ab-other", "ab-this"]
    assert sorted(sub.source_topics) == ["a", "b"]


def test_joined_topics_of_different_sizes_are_refused_with_their_names() -> None:
    from baton.worker.runtime.internal_topics import copartitioning_problem

    built = _join("inner").build()
    assert copartitioning_problem(built, {"clicks": 4, "views": 4}) == ""
    problem = copartitioning_problem(built, {"clicks": 4, "views": 6})
    assert "co-partitioned" in problem and "clicks (4), views (6)" in problem
    t = Topology()
    users = t.table("users", key=STR, value=JSON)
    t.stream("orders", key=STR, value=JSON).join(users, lambda o, u: o).to("out")
    assert "orders (3), users (2)" in copartitioning_problem(t.build(), {"orders": 3, "users": 2})
    merged = Topology()  # no join: a merge of topics of any sizes is fine
    merged.stream(["a", "b"]).to("out")
    assert copartitioning_problem(merged.build(), {"a": 1, "b": 5}) == ""
