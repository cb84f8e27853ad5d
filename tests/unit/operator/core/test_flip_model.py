"""A model check of the flip protocol: every input offset's output once, by one color, in order.

The pure parts that workers and the coordinator run (:class:`~baton.control.gate.Gate`,
:class:`~baton.control.flipper.FlipAttempt`, :func:`~baton.control.flipper.prepare_refusal`,
the first-decision fold of :func:`~baton.control.coordinator.fold`) are driven through random
interleavings by hypothesis: input arriving, each color reading the control topic with its
own lag and processing, reports delivered late and out of order across members, the
coordinator preparing, deciding and crashing, workers restarting, giving up on an undecided
prepare (they write an Abort), partitions moving to a new member (a new group generation),
and the idle color rebuilt (new application id: empty state, input from offset 0), as the
operator does it (only when no flip is running or draining). One input partition with one
key: the sink must see offsets 0, 1, 2, ... strictly increasing, and at the end every one.

What it found. On the code before issue 16's fixes (08b89d6), an earlier version of this
machine (the same rules, written against that API: wall-clock deadlines, no operator rule)
failed with ``--hypothesis-seed=1`` within its first 2,000 examples (44 s), with three
distinct shrunk counterexamples:

* **A Rebuild re-emits history** (hole 1)::

      produce(1); prepare(green); blue emits 0, reports 1; green reports 0 -> commit, cut 1
      rebuild(blue); blue runs -> offset 0 emitted again, by the rebuilt blue

* **The inactive color emits below the cut with no lower bound** (hole 1 without a
  Rebuild)::

      produce(1); prepare(green); blue emits 0, reports 1; green reports 0 -> commit, cut 1
      prepare(blue); both report -> commit: green "owes" everything below 1 -> 0 again

* **A flip prepared while the previous one drains loses records** (hole 2)::

      produce(1); prepare(green); blue reports 0; green reads 0 silently, reports 1
      -> commit, cut 1, blue pending; prepare(blue) at once; both report -> commit, cut 1,
      blue emits from 1 and green owes nothing -> offset 0 emitted by neither color

On the fixes while they were being written:

* the first fix of hole 1 let the old active owe ``[its reported position, cut)``; the
  model failed on the second sequence again (green had been silent below the cut of the
  flip that made it active), so what it owes starts at ``max(position, previous cut)``;
* with the operator's drain guard taken out (``draining=()`` below), it fails with
  ``BATON_MODEL_EXAMPLES=10000``: a rollback flip to green leaves blue pending, blue emits
  offset 0, the operator gets a new revision and rebuilds blue (Rebuild) before the drain,
  and the rebuilt blue emits offset 0 again.

After the fixes, in a clean-clone run of the unit suite (random seed, 1,500 examples), it
found a hole in the operator's deploy machine: the operator's own flip aborts while a flip
by hand commits, and the pass that learns of the abort ignored the control topic::

    produce(1); operator: rollback -> prepare(green), epoch 1; green reports, gives up (Abort 1)
    baton flip --to green: prepare(epoch 2), both report -> commit, green active, emits 0
    operator (new revision, Rebuild): still thinks blue is active -> rebuilds green, the
    ACTIVE color, from offset 0 -> offset 0 emitted twice by green

Fixed in ``deploy._control_topic``: a control-topic read at an epoch at or past the ended
flip's wins over its outcome (``Inputs.control_epoch``); regression test in
tests/unit/operator/core/test_deploy.py.

The longer run: ``BATON_MODEL_EXAMPLES=20000 pytest --timeout=0 tests/unit/operator/core/test_flip_model.py``
(passed in 413 s on the 2-core dev machine, 2026-11-25; 50,000 examples take over 15 minutes,
past pytest's default timeout, hence ``--timeout=0``); the unit suite runs 1,500 (15-27 s).
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from baton.control.coordinator import fold
from baton.control.flipper import FlipAttempt, prepare_refusal
from baton.control.gate import Gate
from baton.control.messages import COLORS, Abort, Color, Commit, Drained, Message, Prepare, Report
from baton.operator.core.deploy import ColorView, FlipOutcome, Inputs, Plan, plan
from baton.operator.core.spec import UpgradeSpec

pytestmark = pytest.mark.unit

TP = ("clicks", 0)
TIMEOUT_MS = 10_000
# the operator as users run it for Rebuild deploys, with the waits shortened to model steps
UPGRADE = UpgradeSpec(
    state_migration="Rebuild",
    max_lag_to_promote=2,
    promotion_stable_seconds=0,
    standby_upgrade_delay_seconds=5,
)


@dataclass
class Worker:
    """The member of one color that owns the partition (processing commits every record)."""

    color: Color
    member: str
    generation: int
    gate: Gate
    cursor: int = 0  # how far it has read the control topic
    pos: int = 0  # next input offset = committed position (exactly-once: output, position, Drained together)
    reported: tuple[int, int] | None = None  # (epoch, generation) it reported for
    paused_ms: int | None = None  # model time at which it paused for the pending prepare


@dataclass
class Attempt:
    flip: FlipAttempt
    started_ms: int
    cursor: int
    by_operator: bool


class FlipModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.inputs = 0
        self.control: list[Message] = []
        self.outbox: list[Report] = []  # written by workers, not yet appended to the topic
        self.out: list[tuple[int, Color]] = []
        self.now = 0
        self.generation = 0
        self.workers = {c: self._new_worker(c, 0) for c in COLORS}
        self.attempt: Attempt | None = None
        self.revision = 1  # the StreamApp spec's revision
        self.operator: Plan | None = None  # the operator's last plan (its status)
        self.flip_outcome: FlipOutcome | None = None  # an operator flip that ended, for its next pass

    # -- helpers -------------------------------------------------------------------------
    def _new_worker(self, color: Color, pos: int) -> Worker:
        """A member that just got the partition: it reads the control topic to its end first."""
        self.generation += 1
        w = Worker(color, f"{color}-{self.generation}", self.generation, Gate(color), pos=pos)
        self._read(w, len(self.control))
        return w

    def _read(self, w: Worker, upto: int) -> None:
        while w.cursor < upto:
            w.gate.apply(self.control[w.cursor])
            w.cursor += 1

    def _step(self, w: Worker) -> None:
        prepare = w.gate.pending_prepare()
        if prepare is not None:
            if w.paused_ms is None:
                w.paused_ms = self.now
            if w.reported != (prepare.epoch, w.generation):
                refusal = w.gate.refusal()
                report = Report(
                    prepare.epoch, w.color, w.member, {TP: w.pos}, ("clicks",), refusal, w.generation
                )
                self.outbox.append(report)
                w.reported = (prepare.epoch, w.generation)
            return
        w.paused_ms = None
        if w.pos >= self.inputs or w.gate.held(TP, w.pos):
            return
        if w.gate.emits(TP, w.pos):
            self.out.append((w.pos, w.color))
        w.pos += 1
        if w.gate.must_confirm_drain(TP, w.pos) and (w.gate.state.epoch, TP) not in w.gate.drained:
            self.control.append(Drained(w.gate.state.epoch, TP))

    def _coordinator_prepares(self, to: Color, by_operator: bool = False) -> None:
        if self.attempt is not None:
            return
        gate = fold(self.control)
        if gate.state.active == to or prepare_refusal(gate.state, gate.drained):
            return
        stale = gate.pending_prepare()
        if stale is not None:
            self.control.append(Abort(stale.epoch, "its coordinator stopped"))
        prepare = Prepare(gate.top_epoch + 1, to, TIMEOUT_MS)
        self.control.append(prepare)
        flip = FlipAttempt(prepare, frozenset({TP}), gate.state)
        self.attempt = Attempt(flip, self.now, len(self.control), by_operator)

    def _coordinator_decides(self) -> None:
        a = self.attempt
        if a is None:
            return
        for msg in self.control[a.cursor :]:
            if isinstance(msg, Report):
                a.flip.on_report(msg)
        a.cursor = len(self.control)
        epoch = a.flip.prepare.epoch
        decision = None if epoch in fold(self.control).decided else a.flip.decision(self.now - a.started_ms)
        if isinstance(decision, Commit):
            self.control += [decision, decision.state]
        elif isinstance(decision, Abort):
            self.control.append(decision)
        first = fold(self.control).decided.get(epoch)  # a worker may have given up first
        if first is not None:
            self.attempt = None
            if a.by_operator:
                self.flip_outcome = FlipOutcome(a.flip.prepare.to, isinstance(first, Commit), epoch)

    # -- rules ---------------------------------------------------------------------------
    @rule(n=st.integers(1, 3))
    def produce(self, n: int) -> None:
        self.inputs += n

    @rule(
        color=st.sampled_from(COLORS),
        read=st.sampled_from([0, 1, 2, 99]),
        n=st.sampled_from([0, 1, 2, 99]),
        deliver=st.sampled_from([True, True, False]),
    )
    def worker_runs(self, color: Color, read: int, n: int, deliver: bool) -> None:
        w = self.workers[color]
        self._read(w, min(len(self.control), w.cursor + read))
        for _ in range(n):
            self._step(w)
        if deliver:  # its reports reach the topic now (else later, in any order: report_delivered)
            mine = [r for r in self.outbox if r.member == w.member]
            self.outbox = [r for r in self.outbox if r.member != w.member]
            self.control += mine
        self._coordinator_decides()  # the coordinator polls all the time

    @rule(k=st.integers(0, 3))
    def report_delivered(self, k: int) -> None:
        if self.outbox:
            self.control.append(self.outbox.pop(k % len(self.outbox)))
        self._coordinator_decides()

    @rule(act=st.sampled_from(["prepare", "prepare", "prepare", "crash"]), to=st.sampled_from(COLORS))
    def coordinator(self, act: str, to: Color) -> None:
        """``baton flip`` run by hand (besides the operator's flips), or the coordinator dying."""
        if act == "prepare":
            self._coordinator_prepares(to)
        else:
            self.attempt = None

    @rule(
        new_revision=st.sampled_from([False, False, True]),
        rollback=st.sampled_from([False, False, False, True]),
    )
    def operator_reconciles(self, new_revision: bool, rollback: bool) -> None:
        """The operator's deploy machine: it starts flips and rebuilds the idle color."""
        self.revision += new_revision
        gate = fold(self.control)
        prev = self.operator
        views = {}
        for c in COLORS:
            assignment = prev.record.colors[c] if prev is not None else None
            views[c] = ColorView(True, lag=self.inputs - self.workers[c].pos, assignment=assignment)
        inputs = Inputs(
            colors=COLORS,
            upgrade=UPGRADE,
            revision=f"r{self.revision}",
            spec=f"r{self.revision}",
            record=prev.record if prev is not None else None,
            active=prev.active if prev is not None else "blue",
            views=views,
            now=self.now / 1000,
            control_active=gate.state.active,
            control_epoch=gate.state.epoch,
            draining=tuple(f"{t}:{p}" for t, p in gate.undrained()),
            rollback=rollback,
            flip_running=self.attempt is not None and self.attempt.by_operator,
            flip=self.flip_outcome,
        )
        self.flip_outcome = None
        now = plan(inputs)
        self.operator = now
        for c in COLORS:
            before = prev.record.colors[c] if prev is not None else None
            after = now.record.colors[c]
            if before is not None and after.generation != before.generation:
                self.workers[c] = self._new_worker(c, 0)  # Rebuild: new application id, input from 0
        if now.flip is not None:
            self._coordinator_prepares(now.flip, by_operator=True)

    @rule(act=st.sampled_from(["time", "give up", "restart", "moved"]), color=st.sampled_from(COLORS))
    def lifecycle(self, act: str, color: Color) -> None:
        w = self.workers[color]
        if act == "time":
            self.now += 2_500
            self._coordinator_decides()
        elif act == "give up":
            abort = w.gate.give_up(w.member, 10**9)  # safety must not depend on when
            if abort is not None and w.paused_ms is not None:
                self.control.append(abort)
        elif act in ("restart", "moved"):
            # a restart keeps the member (static membership); a move is a new member in a new
            # generation; both start from the committed position with a fresh gate
            fresh = self._new_worker(color, w.pos)
            if act == "restart":
                fresh.member, fresh.generation = w.member, w.generation
            self.workers[color] = fresh

    @invariant()
    def output_in_order_without_duplicates(self) -> None:
        offsets = [o for o, _ in self.out]
        assert all(a < b for a, b in itertools.pairwise(offsets)), f"sink saw offsets {self.out}"

    def teardown(self) -> None:
        """Let everything settle, then every input offset must have been emitted."""
        for _ in range(6):
            while self.outbox:
                self.control.append(self.outbox.pop(0))
            self.now += 100_000
            self._coordinator_decides()
            for w in self.workers.values():
                self._read(w, len(self.control))
                if self.attempt is None and (abort := w.gate.give_up(w.member, 10**9)) is not None:
                    self.control.append(abort)
                    self._read(w, len(self.control))
                for _ in range(self.inputs + 2):
                    self._step(w)
        self.output_in_order_without_duplicates()
        emitted = {o for o, _ in self.out}
        assert emitted == set(range(self.inputs)), (
            f"emitted by neither color: {sorted(set(range(self.inputs)) - emitted)}"
        )


TestFlipModel = FlipModel.TestCase
TestFlipModel.settings = settings(
    max_examples=int(os.environ.get("BATON_MODEL_EXAMPLES", "1500")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
