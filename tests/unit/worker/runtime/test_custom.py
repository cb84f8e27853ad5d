"""Custom processors and punctuators: stores, forwarding, and punctuations where an uninterrupted run has them."""

from __future__ import annotations

from typing import Any

import pytest

from baton import JSON, STR, Processor, ProcessorContext, PunctuationType, Topology, TopologyError
from baton.worker.runtime.punctuation import NO_TIME, Punctuations, crossed
from baton.worker.runtime.task import Task
from tests.support.tasks import Msg, Sent, make_task

pytestmark = pytest.mark.unit


def test_a_clock_fires_when_it_crosses_a_multiple_of_the_interval_once_per_jump() -> None:
    assert crossed(1000, 999, 1000)
    assert not crossed(1000, 1000, 1999)
    assert crossed(1000, 1500, 7300)  # several multiples: once
    assert not crossed(1000, NO_TIME, 5000)  # the first record starts the clock
    assert not crossed(1000, 3000, 2000)  # time never goes back
    p = Punctuations()
    fired: list[int] = []
    wall = p.add(100, PunctuationType.WALL_CLOCK, fired.append)
    assert p.due_on_wall_clock(1050) == []  # the first tick only starts the wall clock
    assert p.due_on_wall_clock(1101) == [wall]
    wall.cancel()
    assert p.due_on_wall_clock(1301) == []
    with pytest.raises(ValueError, match="at least 1 ms"):
        p.add(0, PunctuationType.STREAM_TIME, fired.append)


class PerUser(Processor):
    """Counts per user in a store and forwards each count; every 100 ms of stream time, a tick."""

    def init(self, context: ProcessorContext) -> None:
        super().init(context)
        self.counts = context.store("counts")
        context.schedule(100, PunctuationType.STREAM_TIME, self.tick)

    def process(self, key: Any, value: Any) -> None:
        n = (self.counts.get(key) or 0) + 1
        self.counts.put(key, n)
        total = (self.counts.get("~total") or 0) + 1
        self.counts.put("~total", total)
        self.context.forward(key, n)

    def tick(self, at: int) -> None:
        assert self.context.timestamp == at
        self.context.forward(f"tick@{at}", self.counts.get("~total"))


def _per_user() -> Topology:
    t = Topology()
    t.store("counts", key=STR, value=JSON)
    t.stream("clicks", key=STR, value=JSON).process(PerUser, stores=["counts"]).to("out", key=STR, value=JSON)
    return t


def _feed(task: Task, events: list[tuple[str, int]], start: int) -> None:
    for offset, (user, ts) in enumerate(events, start=start):
        task.process(Msg("clicks", offset, user.encode(), b"{}", ts))


def test_a_processor_uses_its_store_forwards_and_ticks_on_stream_time() -> None:
    task, sent, _dead, _stores = make_task(_per_user(), caching=True)
    _feed(task, [("a", 10), ("b", 50), ("a", 120), ("a", 90), ("b", 450)], start=10)
    task.flush()
    assert sent.to("out") == [
        (b"a", b"1"),
        (b"b", b"1"),
        (b"a", b"2"),
        (b"tick@120", b"3"),  # 50 -> 120 crossed 100
        (b"a", b"3"),  # ts 90: stream time stays 120
        (b"b", b"2"),
        (b"tick@450", b"5"),  # 120 -> 450 crossed 200, 300, 400: one tick
    ]
    assert task.commit_metadata() == "450"
    assert (b"a", b"3") in sent.to("app-counts-changelog")  # the store has its changelog


def test_a_restart_from_the_committed_stream_time_ticks_where_an_uninterrupted_run_does() -> None:
    events = [(f"u{i % 3}", 37 * i - (i % 4) * 20) for i in range(60)]
    whole, sent, _dead, _ = make_task(_per_user(), caching=False)
    _feed(whole, events, start=10)
    for cut in (1, 7, 31, 59):
        task, first, _dead, stores = make_task(_per_user(), caching=False)
        _feed(task, events[:cut], start=10)
        task.flush()
        metadata = task.commit_metadata()
        task.committed_ok({})  # the offsets went out with this metadata; then the process dies
        again, second, _dead, _ = make_task(_per_user(), caching=False, stores=stores)
        again.resume_stream_time(metadata)
        _feed(again, events[cut:], start=10 + cut)
        assert first.to("out") + second.to("out") == sent.to("out"), cut


def test_an_aborted_commit_rewinds_the_stream_time_too() -> None:
    task, sent, _dead, _stores = make_task(_per_user(), caching=False)
    _feed(task, [("a", 10)], start=10)
    task.committed_ok({})
    _feed(task, [("a", 150)], start=11)  # ticks at 150, then the transaction aborts
    task.rewind()
    assert task.stream_time == 10
    _feed(task, [("a", 150)], start=11)
    assert [k for k, _ in sent.to("out")].count(b"tick@150") == 2  # once per attempt: exactly once committed


def test_a_failing_punctuator_is_dead_lettered_and_processing_goes_on() -> None:
    class Broken(Processor):
        def init(self, context: ProcessorContext) -> None:
            super().init(context)
            context.schedule(10, PunctuationType.STREAM_TIME, self.boom)

        def process(self, key: Any, value: Any) -> None:
            self.context.forward(key, value)

        def boom(self, _at: int) -> None:
            raise RuntimeError("boom")

    t = Topology()
    t.stream("clicks", key=STR, value=JSON).process(Broken).to("out")
    task, sent, dead, _stores = make_task(t, caching=False)
    _feed(task, [("a", 5), ("a", 15), ("a", 16)], start=10)
    assert len(sent.to("out")) == 3
    assert dead == [("process", 11)]


def test_stores_must_be_declared_and_used() -> None:
    t = Topology()
    with pytest.raises(TopologyError, match="declare it first"):
        t.stream("a").process(PerUser, stores=["nope"])
    t2 = Topology()
    t2.store("orphan")
    t2.stream("a").to("b")
    with pytest.raises(TopologyError, match="no processor uses it"):
        t2.build()


def test_wall_clock_punctuators_tick_without_records() -> None:
    class Heartbeat(Processor):
        def init(self, context: ProcessorContext) -> None:
            super().init(context)
            context.schedule(1000, PunctuationType.WALL_CLOCK, lambda at: context.forward("beat", at))

        def process(self, key: Any, value: Any) -> None:
            pass

    t = Topology()
    t.stream("clicks", key=STR, value=JSON).process(Heartbeat).to("out", key=STR, value=JSON)
    task, sent, _dead, _ = make_task(t, caching=False)
    for now in (10_500, 10_900, 11_000, 11_400, 13_100):
        task.punctuate_wall_clock(now)
    assert sent.to("out") == [(b"beat", b"11000"), (b"beat", b"13100")]
    assert isinstance(sent, Sent)
