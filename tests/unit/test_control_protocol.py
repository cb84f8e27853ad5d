"""The flip protocol's pure parts: messages, the gate's emission rule, the coordinator's decisions."""

from __future__ import annotations

import itertools
import random

import pytest

from baton.control.flipper import FlipAttempt, compute_cut
from baton.control.gate import RESUME_GRACE_MS, Gate
from baton.control.messages import (
    COLORS,
    Abort,
    ActiveState,
    BadControlRecord,
    Commit,
    Drained,
    Prepare,
    Report,
    decode,
    other,
)

pytestmark = pytest.mark.unit

P0, P1 = ("clicks", 0), ("clicks", 1)


@pytest.mark.parametrize(
    "msg",
    [
        ActiveState(3, "green", {P0: 10, P1: 7}, frozenset({P1})),
        Prepare(4, "blue", 1_700_000_000_000),
        Report(4, "green", "click-counter-green-0", {P0: 12, ("my:topic", 3): 5}, ("clicks",), "no"),
        Commit(ActiveState(4, "blue", {P0: 12}, frozenset())),
        Abort(4, "no position from green"),
        Drained(4, ("my:topic", 3)),
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


def test_cut_is_the_further_position() -> None:
    assert compute_cut({P0: 5, P1: 9}, {P0: 7, P1: 2}) == {P0: 7, P1: 9}


def _emitters(gates: dict[str, Gate], tp: tuple[str, int], offset: int) -> list[str]:
    return [c for c, g in gates.items() if g.emits(tp, offset)]


def test_exactly_one_color_emits_each_offset_across_flips() -> None:
    """Whatever the positions, every input offset is emitted by exactly one color."""
    rng = random.Random(7)
    gates = {"blue": Gate("blue"), "green": Gate("green")}
    state = gates["blue"].state
    for epoch in range(1, 30):
        to = other(state.active)
        attempt = FlipAttempt(Prepare(epoch, to, 10**15), frozenset({P0, P1}), state)
        for color in COLORS:
            attempt.on_report(
                Report(epoch, color, f"{color}-0", {P0: rng.randint(0, 1000), P1: rng.randint(0, 1000)})
            )
        decision = attempt.decision(now_ms=0)
        assert isinstance(decision, Commit)
        for g in gates.values():
            g.apply(decision)
        state = decision.state
        for tp, offset in itertools.product((P0, P1), range(0, 1100, 7)):
            assert len(_emitters(gates, tp, offset)) == 1


def test_old_active_emits_below_cut_new_active_from_cut() -> None:
    blue, green = Gate("blue"), Gate("green")
    commit = Commit(ActiveState(1, "green", {P0: 100}, frozenset()))
    for g in (blue, green):
        g.apply(commit)
    assert blue.emits(P0, 99) and not blue.emits(P0, 100)
    assert not green.emits(P0, 99) and green.emits(P0, 100)
    # a partition without a cut (added after the flip) belongs to the active color
    assert green.emits(P1, 0) and not blue.emits(P1, 0)


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
    attempt = FlipAttempt(Prepare(2, "green", deadline_ms=1000), frozenset({P0, P1}), ActiveState(1, "blue"))
    attempt.on_report(Report(2, "blue", "b0", {P0: 1, P1: 1}))
    attempt.on_report(Report(2, "green", "g0", {P0: 1}))
    assert attempt.decision(now_ms=999) is None
    decision = attempt.decision(now_ms=1001)
    assert isinstance(decision, Abort)
    assert "green: clicks:1" in decision.reason


def test_reports_of_other_epochs_are_ignored_and_moved_partitions_take_the_later_position() -> None:
    attempt = FlipAttempt(Prepare(3, "blue", 10**15), frozenset({P0}), ActiveState(2, "green"))
    attempt.on_report(Report(2, "blue", "b0", {P0: 999}))
    attempt.on_report(Report(3, "blue", "b0", {P0: 10}))
    attempt.on_report(Report(3, "blue", "b1", {P0: 12}))
    attempt.on_report(Report(3, "green", "g0", {P0: 11}))
    decision = attempt.decision(0)
    assert isinstance(decision, Commit)
    assert decision.state.cut == {P0: 12}


def test_prepare_pauses_until_commit_abort_or_deadline_plus_grace() -> None:
    gate = Gate("green")
    prepare = Prepare(1, "green", deadline_ms=5_000)
    gate.apply(prepare)
    assert gate.pending_prepare(now_ms=1_000) == prepare
    assert gate.pending_prepare(now_ms=5_000 + RESUME_GRACE_MS + 1) is None
    gate.apply(Abort(1, "test"))
    assert gate.pending_prepare(now_ms=1_000) is None
    # a stale prepare (older than the state in force) never pauses
    gate.apply(Commit(ActiveState(5, "green")))
    gate.apply(Prepare(4, "blue", deadline_ms=10**15))
    assert gate.pending_prepare(now_ms=0) is None


def test_a_refusing_worker_aborts_the_flip_at_once_with_its_reason() -> None:
    attempt = FlipAttempt(Prepare(1, "green", 10**15), frozenset({P0}), ActiveState(0, "blue"))
    attempt.on_report(Report(1, "blue", "b0", {P0: 3}, ("clicks",), refusal="the topology repartitions"))
    decision = attempt.decision(now_ms=0)
    assert isinstance(decision, Abort)
    assert decision.reason == "blue worker b0 refuses the flip: the topology repartitions"
