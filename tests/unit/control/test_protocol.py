"""The flip protocol's pure parts: messages, the gate's emission rule, the coordinator's decisions."""

from __future__ import annotations

import pytest

from baton.control.flipper import FlipAttempt, compute_cut, prepare_refusal
from baton.control.gate import RESUME_GRACE_MS, Gate
from baton.control.messages import (
    Abort,
    ActiveState,
    BadControlRecord,
    Commit,
    Drained,
    Draining,
    Prepare,
    Report,
    decode,
)

pytestmark = pytest.mark.unit

P0, P1 = ("clicks", 0), ("clicks", 1)


@pytest.mark.parametrize(
    "msg",
    [
        ActiveState(3, "green", {P0: 10, P1: 7}, frozenset({P1}), {P1: 3}),
        Prepare(4, "blue", 10_000),
        Report(4, "green", "click-counter-green-0", {P0: 12, ("my:topic", 3): 5}, ("clicks",), "no", 17),
        Commit(ActiveState(4, "blue", {P0: 12}, frozenset())),
        Abort(4, "no position from green"),
        Drained(4, ("my:topic", 3)),
        Draining("green", frozenset({"clicks-green-3", "clicks-green-4"})),
        Draining("blue"),
    ],
)
def test_messages_round_trip(msg: object) -> None:
    assert decode(msg.encode()) == msg  # type: ignore[attr-defined]


def test_unreadable_records_raise_a_clear_error() -> None:
    with pytest.raises(BadControlRecord, match="unknown control record type 'nope'"):
        decode(b'{"type": "nope"}')
    with pytest.raises(BadControlRecord, match="unreadable"):
        decode(b"not json")
    with pytest.raises(BadControlRecord, match="blue or green"):
        decode(b'{"type": "state", "epoch": 1, "active": "red", "cut": {}}')
    with pytest.raises(BadControlRecord, match="a color and a list of pods"):
        decode(b'{"type": "draining", "color": "blue", "pods": "clicks-blue-2"}')


def test_a_gate_keeps_only_its_own_colors_drain_marks_and_the_latest_wins() -> None:
    gate = Gate("blue")
    gate.apply(Draining("green", frozenset({"app-green-1"})))
    assert gate.draining == frozenset()
    gate.apply(Draining("blue", frozenset({"app-blue-2", "app-blue-1"})))
    assert gate.draining == {"app-blue-1", "app-blue-2"}
    before = gate.state
    gate.apply(Draining("blue"))  # the scale-in ended (or was cancelled)
    assert gate.draining == frozenset() and gate.state == before and gate.top_epoch == 0


def test_cut_is_the_further_position() -> None:
    assert compute_cut({P0: 5, P1: 9}, {P0: 7, P1: 2}) == {P0: 7, P1: 9}


def _emitters(gates: dict[str, Gate], tp: tuple[str, int], offset: int) -> list[str]:
    return [c for c, g in gates.items() if g.emits(tp, offset)]


def test_old_active_owes_only_the_range_from_its_position_to_the_cut() -> None:
    """Blue reported 40 and green 100: blue emits [40, 100) and nothing else, green from 100."""
    attempt = FlipAttempt(Prepare(1, "green", 10_000), frozenset({P0, P1}), ActiveState(0, "blue"))
    attempt.on_report(Report(1, "blue", "b0", {P0: 40, P1: 100}))
    attempt.on_report(Report(1, "green", "g0", {P0: 100, P1: 60}))
    commit = attempt.decision(0)
    assert isinstance(commit, Commit)
    gates = {"blue": Gate("blue"), "green": Gate("green")}
    for g in gates.values():
        g.apply(commit)
    assert [_emitters(gates, P0, o) for o in (0, 39, 40, 99, 100)] == [[], [], ["blue"], ["blue"], ["green"]]
    # P1: blue was at the cut, it owes nothing; a rebuilt blue (from offset 0) stays silent
    assert [_emitters(gates, P1, o) for o in (0, 99, 100)] == [[], [], ["green"]]
    # once blue's Drained record is out, its range is closed (a Rebuild replays it silently)
    for g in gates.values():
        g.apply(Drained(1, P0))
    assert _emitters(gates, P0, 50) == []
    # a partition without a cut (added after the flip) belongs to the active color
    assert _emitters(gates, ("other", 0), 5) == ["green"]


def test_what_the_old_active_owes_starts_at_the_previous_cut() -> None:
    """Green became active at 100 and is still at 60 when flipped back: it owes [100, cut)."""
    previous = ActiveState(1, "green", {P0: 100})
    attempt = FlipAttempt(Prepare(2, "blue", 10_000), frozenset({P0}), previous)
    attempt.on_report(Report(2, "blue", "b0", {P0: 130}))
    attempt.on_report(Report(2, "green", "g0", {P0: 60}))
    commit = attempt.decision(0)
    assert isinstance(commit, Commit)
    assert commit.state.cut == {P0: 130} and commit.state.floor == {P0: 100}
    # and a cut never goes below the previous one (a rebuilt color reports an early position)
    attempt = FlipAttempt(Prepare(2, "blue", 10_000), frozenset({P0}), previous)
    attempt.on_report(Report(2, "blue", "b0", {P0: 5}))
    attempt.on_report(Report(2, "green", "g0", {P0: 90}))
    commit = attempt.decision(0)
    assert isinstance(commit, Commit)
    assert commit.state.cut == {P0: 100} and commit.state.pending == frozenset()


def test_no_flip_is_prepared_while_the_previous_one_drains() -> None:
    state = ActiveState(3, "green", {P0: 100}, frozenset({P0}), {P0: 40})
    reason = prepare_refusal(state, set())
    assert reason.startswith("flip 3 to green is still draining: blue has not yet emitted everything")
    assert "clicks:0" in reason
    assert prepare_refusal(state, {(3, P0)}) == ""
    gate = Gate("blue")
    gate.apply(Commit(state))
    assert "still draining" in gate.refusal()
    gate.apply(Drained(3, P0))
    assert gate.refusal() == ""


def test_the_first_decision_in_the_topic_wins_for_every_reader() -> None:
    prepare = Prepare(2, "green", 10_000)
    late_commit = Commit(ActiveState(2, "green", {P0: 10}))
    gate = Gate("blue")
    for msg in (prepare, Abort(2, "blue worker b0 heard no decision"), late_commit, late_commit.state):
        gate.apply(msg)
    assert gate.state == ActiveState(0, "blue") and isinstance(gate.decided[2], Abort)
    assert gate.pending_prepare() is None
    gate = Gate("blue")
    for msg in (prepare, late_commit, Abort(2, "too late")):
        gate.apply(msg)
    assert gate.state.active == "green" and gate.decided[2] == late_commit


def test_new_active_is_held_until_old_active_drained() -> None:
    attempt = FlipAttempt(Prepare(1, "green", 10**15), frozenset({P0, P1}), ActiveState(0, "blue"))
    attempt.on_report(Report(1, "blue", "b0", {P0: 50, P1: 80}))
    attempt.on_report(Report(1, "green", "g0", {P0: 70, P1: 60}))  # green ahead on P0 only
    decision = attempt.decision(0)
    assert isinstance(decision, Commit)
    assert decision.state.cut == {P0: 70, P1: 80}
    assert decision.state.pending == frozenset({P0})

    blue, green = Gate("blue"), Gate("green")
    for g in (blue, green):
        g.apply(decision)
    assert green.held(P0, 70) and not green.held(P1, 80)
    assert not blue.must_confirm_drain(P0, committed_position=69)
    assert blue.must_confirm_drain(P0, committed_position=70)
    for g in (blue, green):
        g.apply(Drained(1, P0))
    assert not green.held(P0, 70)
    assert not blue.must_confirm_drain(P0, committed_position=71)


def test_missing_reports_abort_at_the_deadline_naming_what_is_missing() -> None:
    attempt = FlipAttempt(Prepare(2, "green", timeout_ms=1000), frozenset({P0, P1}), ActiveState(1, "blue"))
    attempt.on_report(Report(2, "blue", "b0", {P0: 1, P1: 1}))
    attempt.on_report(Report(2, "green", "g0", {P0: 1}))
    assert attempt.decision(elapsed_ms=999) is None
    decision = attempt.decision(elapsed_ms=1001)
    assert isinstance(decision, Abort)
    assert "green: clicks:1" in decision.reason


def test_reports_of_other_epochs_are_ignored_and_moved_partitions_take_the_later_position() -> None:
    attempt = FlipAttempt(Prepare(3, "blue", 10_000), frozenset({P0}), ActiveState(2, "green"))
    attempt.on_report(Report(2, "blue", "b0", {P0: 999}))
    attempt.on_report(Report(3, "blue", "b0", {P0: 10}))
    attempt.on_report(Report(3, "blue", "b1", {P0: 12}))
    attempt.on_report(Report(3, "green", "g0", {P0: 11}))
    decision = attempt.decision(0)
    assert isinstance(decision, Commit)
    assert decision.state.cut == {P0: 12}


def test_only_the_newest_generation_of_reports_counts() -> None:
    """A rebalance mid-flip: the old generation's positions are dropped until all re-report."""
    attempt = FlipAttempt(Prepare(3, "green", 10_000), frozenset({P0, P1}), ActiveState(2, "blue"))
    attempt.on_report(Report(3, "green", "g0", {P0: 5, P1: 5}, generation=7))
    attempt.on_report(Report(3, "blue", "b0", {P0: 10, P1: 10}, generation=4))
    attempt.on_report(Report(3, "blue", "b1", {P1: 12}, generation=5))  # P1 moved to b1
    assert attempt.missing()["blue"] == [P0]  # b0's generation-4 report no longer counts
    assert attempt.decision(0) is None
    attempt.on_report(Report(3, "blue", "b0", {P0: 999}, generation=4))  # stale: ignored
    attempt.on_report(Report(3, "blue", "b0", {P0: 10}, generation=5))
    decision = attempt.decision(0)
    assert isinstance(decision, Commit)
    assert decision.state.cut == {P0: 10, P1: 12}


def test_prepare_pauses_until_decided_and_a_worker_gives_up_after_timeout_plus_grace() -> None:
    gate = Gate("green")
    prepare = Prepare(1, "green", timeout_ms=5_000)
    gate.apply(prepare)
    assert gate.pending_prepare() == prepare
    assert gate.give_up("g0", waited_ms=5_000 + RESUME_GRACE_MS - 1) is None
    abort = gate.give_up("g0", waited_ms=5_000 + RESUME_GRACE_MS + 1)
    assert abort is not None and abort.epoch == 1 and "green worker g0 heard no decision" in abort.reason
    gate.apply(abort)
    assert gate.pending_prepare() is None
    # a stale prepare (older than the state in force) never pauses
    gate.apply(Commit(ActiveState(5, "green")))
    gate.apply(Prepare(4, "blue", 10_000))
    assert gate.pending_prepare() is None


def test_a_refusing_worker_aborts_the_flip_at_once_with_its_reason() -> None:
    attempt = FlipAttempt(Prepare(1, "green", 10_000), frozenset({P0}), ActiveState(0, "blue"))
    attempt.on_report(Report(1, "blue", "b0", {P0: 3}, ("clicks",), refusal="the topology repartitions"))
    decision = attempt.decision(elapsed_ms=0)
    assert isinstance(decision, Abort)
    assert decision.reason == "blue worker b0 refuses the flip: the topology repartitions"
