"""A model check of the autoscaler: decisions and scaling steps interleaved with deploys and flips.

Hypothesis drives :func:`baton.operator.core.autoscaling.autoscale`, the operator's pass, through
random interleavings of: the input rate changing, time passing (the active color processes
its input, lag grows or drains), metric samples with bounded noise (or none), Pods starting,
becoming Ready, warmups handed over, Pods marked to go releasing their actives, Pods going,
and the deploy machine's phases (a deploy bringing a revision, and maybe new standbys, to
the idle color, its flip, aborted flips, rollbacks, abandoned deploys, the standby upgrade
after a flip). The deploy machine is modelled by its phases, as :mod:`.deploy` moves them.

Checked after every step:

* no scale step starts, moves or ends while a flip runs (the pass leaves the step, the
  counts and the Pods marked to go as they were);
* the active color's count never drops below what its standbys need (standbyReplicas + 1),
  across flips too;
* a Pod of the active color goes only once it owns no active task (scale-in moves tasks
  first);
* ``desired`` stays within the bounds: at most maxReplicas, at most one Pod per process and
  task unless the standby floor needs more, at least minReplicas unless the tasks are fewer;
* at a steady rate (no deploy, lag within its target, noise within +-4 %), once the longest
  stabilisation window has passed, the count moves one way only, and at most once when the
  step policies let one step go all the way.

What it found. The first version failed in about one run in five of 300 examples (random
seeds; one run, ``@seed(46560463026889001038287173247019982453)`` against that version, found
three distinct failures). Shrunk, and pinned at the end of this file:

* **A Pod went while owning tasks**: the Pods of a scale-in were marked only while Draining;
  once the StatefulSet went down (Removing) they were unmarked, a warmup that caught up
  handed one of them actives again, and it was deleted with them. They stay marked now
  until they are gone.
* **A drain decided on an old load completed** (``2 -> 1 -> 3`` at a steady 800 records/s):
  decided at rate 0, it reached Removing in the pass that first saw the new rate. A pass now
  decides first and cancels a drain whose target is below what the load needs.
* **A flip to a color that still removed Pods**: the idle color follows the active one down
  at deploy time without draining; a deploy cancelled right after, then a rollback flip,
  made it active with a Pod about to go that owned its tasks. ``flip_hold`` now holds every
  flip while its target shrinks. (The model's deploy flip also checks what ``deploy.py``'s
  readiness checks: the idle color's Pods at its count.)

The fourth regression test pins a check this model missed at first: with the idle color
sized without its new revision's standby floor, the flip's commit put the new active below
it, and the next pass repaired it before any invariant looked; the floor is now asserted at
the commit. Each regression test fails with its fix taken out, and each of eight mutants of
the module (no freeze during flips, no drain before removal, no cancel, unmarking while
Removing, the idle color without its floor, landing on ``ceil(needed)``, no flip hold, no
window coverage) fails this file or the decision tests (the cancel needs ~3,000 examples
here, hence its pinned test).

The unit suite runs 1,000 examples (~17 s);
``BATON_MODEL_EXAMPLES=3000 pytest --timeout=0 tests/unit/operator/core/test_autoscaling_model.py``
passed with ``--hypothesis-seed=1`` and ``2`` in ~50 s each.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import os
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from baton.control.messages import Color, other
from baton.operator.core.autoscaling import (
    FLIP_PHASES,
    AutoscalingPolicy,
    AutoscalingState,
    Inputs,
    Observed,
    Pass,
    PodSample,
    Sample,
    ScalingRules,
    StepPolicy,
    TaskSample,
    allowed_lag,
    autoscale,
    bounds,
    flip_hold,
    standby_floor,
)

pytestmark = pytest.mark.unit

CAPACITY = 500.0  # records/s one Pod processes fully busy
GENEROUS = (StepPolicy("Percent", 400, 15), StepPolicy("Pods", 100, 15))
TIGHT = (StepPolicy("Pods", 1, 60),)
STEP_EVENTS = {
    "ScaleOutStarted",
    "ScaleInStarted",
    "ScaledOut",
    "ScaledIn",
    "ScaleInAborted",
    "ScaleOutStuck",
    "ScaleOutSlow",
    "ScaleStepSuperseded",
}


@dataclass
class World:
    """One color's Pods and consumer group as they really are."""

    pods: int
    ready: int
    owning: int  # Pods (the lowest ordinals) that own active tasks in this color's group
    warming: bool = False  # the last join placed warmups not yet handed over


class AutoscalingModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.now = 1_800_000_000.0
        self.rate = 0.0
        self.lag = 0.0
        self.processed = 0.0
        self.active: Color = "blue"
        self.phase = "Stable"
        self.deploy_target: Color | None = None
        self.flipped_once = False
        self.state: AutoscalingState | None = None
        self.last: Pass | None = None
        self.marked: tuple[int, ...] = ()
        self.steady_since = self.now
        self.changes: list[tuple[float, int]] = []

    @initialize(
        tasks=st.sampled_from([4, 12]),
        processes=st.sampled_from([1, 1, 2]),
        standbys=st.sampled_from([0, 1, 2]),
        min_replicas=st.sampled_from([1, 2]),
        max_replicas=st.sampled_from([3, 6, 12]),
        utilization=st.sampled_from([0.5, 0.7, 0.9]),
        lag_records=st.sampled_from([None, 5_000]),
        lag_seconds=st.sampled_from([None, 10.0]),
        latency=st.sampled_from([None, None, 5.0]),
        up_window=st.sampled_from([0, 60]),
        down_window=st.sampled_from([0, 120, 300]),
        generous=st.booleans(),
        start=st.integers(1, 6),
        rate=st.sampled_from([0.0, 800.0, 3000.0]),
        flipped=st.booleans(),
    )
    def setup(
        self,
        *,
        tasks: int,
        processes: int,
        standbys: int,
        min_replicas: int,
        max_replicas: int,
        utilization: float,
        lag_records: int | None,
        lag_seconds: float | None,
        latency: float | None,
        up_window: int,
        down_window: int,
        generous: bool,
        start: int,
        rate: float,
        flipped: bool,
    ) -> None:
        self.rate = rate
        self.flipped_once = flipped  # an app that has flipped before can roll back at once
        policies = GENEROUS if generous else TIGHT
        self.policy = AutoscalingPolicy(
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            target_utilization=utilization,
            lag_records=lag_records,
            lag_seconds=lag_seconds,
            latency_p99_seconds=latency,
            scale_up=ScalingRules(up_window, policies),
            scale_down=ScalingRules(down_window, policies),
            step_timeout_seconds=600,
        )
        self.generous = generous
        self.tasks, self.processes = tasks, processes
        self.standbys: dict[Color, int] = {"blue": standbys, "green": standbys}
        self.spec_replicas = max(start, standby_floor(standbys))  # the CRD: standbyReplicas < replicas
        n = self.spec_replicas
        self.world = {c: World(n, n, n) for c in ("blue", "green")}
        self.replicas: dict[Color, int] = {"blue": n, "green": n}
        self.processed = min(rate, n * CAPACITY)
        self._pass(0.0)

    # -- the operator's pass -------------------------------------------------------------------
    def _observed(self) -> Observed:
        w = self.world[self.active]
        draining = 0
        if self.marked:
            draining = max(0, w.owning - min(self.marked))
        return Observed(
            pods=w.pods,
            ready=w.ready,
            members=w.ready * self.processes,
            warmups=1 if w.warming else 0,
            draining_actives=draining,
        )

    def _sample(self, noise: float) -> Sample:
        w = self.world[self.active]
        owning = max(1, w.owning)
        per_task = self.rate / self.tasks
        # the Pods that own tasks process at most their capacity: fewer owners (marked Pods
        # released theirs) cap the rate time_passes last set (else a Pod "processes" more than
        # CAPACITY at busy 1.0, and the capacity the decision measures is inflated)
        processed = min(self.processed, owning * CAPACITY)
        tasks = tuple(
            TaskSample(f"0_{i}", round(self.lag / self.tasks), per_task, processed / self.tasks)
            for i in range(self.tasks)
        )
        p99 = 0.2 + (self.lag / self.rate if self.rate else 0.0)
        pods = []
        for i in range(w.pods):
            if i < w.owning and i < w.ready:
                busy = min(1.0, processed / owning / CAPACITY * (1 + noise))
                pods.append(PodSample(f"p{i}", processed / owning, busy=busy, latency_p99_seconds=p99))
            elif i < w.ready:
                pods.append(PodSample(f"p{i}", 0.0, busy=0.0, latency_p99_seconds=None))
        return Sample(self.now, tasks, tuple(pods))

    def _pass(self, noise: float, metrics: bool = True) -> None:
        before = self.state
        before_marked = self.marked
        count_before = self.replicas[self.active]
        flipping = self.phase in FLIP_PHASES
        result = autoscale(
            Inputs(
                policy=self.policy,
                state=self.state,
                sample=self._sample(noise) if metrics else None,
                now=self.now,
                active=self.active,
                colors=("blue", "green"),
                observed=self._observed(),
                tasks=self.tasks,
                standby_replicas=dict(self.standbys),
                spec_replicas=self.spec_replicas,
                processes_per_pod=self.processes,
                deploy_phase=self.phase,
                deploy_target=self.deploy_target,
            )
        )
        if flipping and before is not None:
            assert result.state.step == before.step, (
                f"a step moved during a flip: {before.step} -> {result.state.step}"
            )
            assert result.replicas[self.active] == before.replicas[self.active], (
                "the active count moved during a flip"
            )
            assert self.marked == before_marked and result.drain_ordinals == before_marked
            moved = [e for e in result.events if e.reason in STEP_EVENTS]
            assert not moved, f"during a flip: {moved}"
        d = result.decision
        b = bounds(self.policy, self.tasks, self.standbys[self.active], self.processes)
        ceiling = math.ceil(self.tasks / self.processes)
        assert b.lo <= d.desired <= b.hi, (d.desired, b)
        assert d.desired <= self.policy.max_replicas
        assert d.desired <= max(ceiling, b.floor), d.reason
        assert d.desired >= min(self.policy.min_replicas, ceiling), d.reason
        self.state, self.last = result.state, result
        w = self.world[self.active]
        if set(self.marked) - set(result.drain_ordinals) and w.owning < w.ready:
            w.warming = True  # unmarked Pods get tasks back through warmups
        self.marked = result.drain_ordinals
        self.replicas = dict(result.replicas)
        self._note_count()
        # outside the bounds (before or after this pass) the bounds move the count, not the load
        inside = all(b.lo <= n <= b.hi for n in (count_before, self.replicas[self.active]))
        if not metrics or self.phase != "Stable" or self._excess() or not inside:
            self.steady_since = self.now

    def _excess(self) -> bool:
        per_task = TaskSample("t", round(self.lag / self.tasks), self.rate / self.tasks, 0.0)
        allowed = allowed_lag(self.policy, per_task)
        return allowed is not None and per_task.lag > allowed

    def _note_count(self) -> None:
        n = self.replicas[self.active]
        if not self.changes or self.changes[-1][1] != n:
            self.changes.append((self.now, n))

    # -- input and time ------------------------------------------------------------------------
    @rule(rate=st.sampled_from([0.0, 200.0, 800.0, 1500.0, 3000.0, 6000.0]))
    def rate_changes(self, rate: float) -> None:
        if rate != self.rate:
            self.rate = rate
            self.steady_since = self.now
            self.changes = self.changes[-1:]

    @rule(
        dt=st.sampled_from([5.0, 15.0, 30.0, 60.0, 120.0, 300.0]),
        reconcile=st.booleans(),
        noise=st.sampled_from([-0.04, -0.02, 0.0, 0.02, 0.04]),
    )
    def time_passes(self, dt: float, reconcile: bool, noise: float) -> None:
        w = self.world[self.active]
        capacity = min(w.owning, w.ready) * CAPACITY
        self.processed = min(capacity, self.rate + self.lag / dt)
        self.lag = max(0.0, self.lag + (self.rate - self.processed) * dt)
        self.now += dt
        if reconcile:
            self._pass(noise)

    @rule(
        noise=st.sampled_from([-0.04, -0.02, 0.0, 0.02, 0.04]),
        metrics=st.sampled_from([True, True, True, False]),
    )
    def reconcile(self, noise: float, metrics: bool) -> None:
        self._pass(noise, metrics)

    # -- Pods and the group --------------------------------------------------------------------
    @rule(color=st.sampled_from(["blue", "green", "blue"]), noise=st.sampled_from([0.0, 0.04, -0.04]))
    def world_progresses(self, color: Color, noise: float) -> None:
        """The next thing that happens to a color's Pods or group, then the operator's pass."""
        w = self.world[color]
        if w.pods < self.replicas[color]:
            self.pods_start(color)
        elif w.ready < w.pods:
            self.pods_ready(color)
        elif w.warming:
            self.warmups_handed_over(color)
        elif color == self.active and self.marked and w.owning > min(self.marked):
            self.marked_pods_release_their_tasks()
        elif w.pods > self.replicas[color]:
            self.pods_go(color)
        self._pass(noise)

    @rule(color=st.sampled_from(["blue", "green"]))
    def pods_start(self, color: Color) -> None:
        w = self.world[color]
        w.pods = max(w.pods, self.replicas[color])

    @rule(color=st.sampled_from(["blue", "green"]))
    def pods_ready(self, color: Color) -> None:
        w = self.world[color]
        if w.ready < w.pods:
            w.ready = w.pods
            if w.ready > w.owning:
                w.warming = True  # the new members get warmups, not actives

    @rule(color=st.sampled_from(["blue", "green"]))
    def warmups_handed_over(self, color: Color) -> None:
        w = self.world[color]
        if w.warming:
            w.warming = False
            keep = min(self.marked) if self.marked and color == self.active else w.ready
            w.owning = max(w.owning, min(w.ready, keep))

    @rule()
    def marked_pods_release_their_tasks(self) -> None:
        """The assignor moves the actives of the Pods marked to go to standby holders."""
        if self.marked:
            w = self.world[self.active]
            w.owning = min(w.owning, *self.marked)

    @rule(color=st.sampled_from(["blue", "green"]))
    def pods_go(self, color: Color) -> None:
        w = self.world[color]
        n = self.replicas[color]
        if w.pods > n:
            if color == self.active:
                assert w.owning <= n, (
                    f"{color}: Pods {n}..{w.pods - 1} go while owning active tasks ({w.owning})"
                )
            w.pods, w.ready, w.owning = n, min(w.ready, n), min(w.owning, n)

    # -- the deploy machine ---------------------------------------------------------------------
    @precondition(lambda self: self.phase == "Stable")
    @rule(
        standbys=st.sampled_from([0, 1, 2]),
        noise=st.sampled_from([0.0, 0.04]),
        now=st.sampled_from([0, 0, 1]),
    )
    def deploy_starts(self, standbys: int, noise: float, now: int) -> None:
        if not now:  # deploys are rarer than everything else
            return
        idle = other(self.active)
        self.phase, self.deploy_target = "Deploying", idle
        self.standbys[idle] = standbys
        self.world[idle].ready = 0  # its Pods restart with the new revision
        self._pass(noise)

    @precondition(lambda self: self.phase == "Deploying")
    @rule()
    def deploy_ready(self) -> None:
        """The idle color rolled out at its count, is Ready and caught up."""
        idle = other(self.active)
        n = self.replicas[idle]
        self.world[idle] = World(n, n, n)
        self.phase = "Promoting"
        self._pass(0.0)

    @precondition(lambda self: self.phase == "Promoting")
    @rule()
    def flip_starts(self) -> None:
        idle = other(self.active)
        w = self.world[idle]
        ready = w.pods == w.ready == self.replicas[idle] and not w.warming  # deploy.py's readiness
        # the deploy's flip waits for a running step, and for the idle color to shrink
        if ready and flip_hold(self.state, idle, w.pods) is None:
            self.phase = "Flipping"
            self._pass(0.0)

    @precondition(lambda self: self.phase == "Stable" and self.flipped_once)
    @rule()
    def rollback_flip(self) -> None:
        """A rollback after a flip flips back at once, whatever step the autoscaler is in."""
        idle = other(self.active)
        if flip_hold(self.state, idle, self.world[idle].pods, rollback=True) is None:
            self.phase = "RollingBack"
            self._pass(0.0)

    @precondition(lambda self: self.phase in ("Deploying", "Promoting"))
    @rule(how=st.sampled_from(["rollback", "abandon"]))
    def deploy_stops(self, how: str) -> None:
        """A rollback before the flip, or promotionTimeoutSeconds: no flip, the idle color stays idle."""
        self.phase, self.deploy_target = "Stable", None
        self._pass(0.0)

    @precondition(lambda self: self.phase in FLIP_PHASES)
    @rule(committed=st.booleans(), noise=st.sampled_from([0.0, 0.04]))
    def flip_ends(self, committed: bool, noise: float) -> None:
        if committed:
            self.active = other(self.active)
            self.flipped_once = True
            # at the commit, before any pass: the new active must already carry its standbys
            self.active_never_below_the_standby_need()
            self.phase, self.deploy_target = "Stable", None
            w = self.world[self.active]
            # both colors process the whole input; the new active's Pods own their tasks
            w.owning = min(w.ready, w.pods)
            self.changes = [(self.now, self.replicas[self.active])]
            self.steady_since = self.now
        else:
            self.phase = "Promoting" if self.phase == "Flipping" else "Stable"
        self._pass(noise)

    @precondition(lambda self: self.phase == "Stable" and self.flipped_once)
    @rule()
    def standby_upgrade(self) -> None:
        """After standbyUpgradeDelaySeconds the old color gets the active color's revision."""
        idle = other(self.active)
        self.standbys[idle] = self.standbys[self.active]
        self.world[idle].ready = 0
        self._pass(0.0)

    # -- invariants ---------------------------------------------------------------------------
    @invariant()
    def active_never_below_the_standby_need(self) -> None:
        if self.state is None:
            return
        need = standby_floor(self.standbys[self.active])
        assert self.replicas[self.active] >= need, (
            f"{self.active} runs {self.replicas[self.active]} Pods, its {self.standbys[self.active]} standbys need {need}"
        )

    @invariant()
    def steady_rate_changes_at_most_once(self) -> None:
        window = max(
            self.policy.scale_up.stabilization_window_seconds,
            self.policy.scale_down.stabilization_window_seconds,
        )
        settled = self.steady_since + window
        after = [(t, n) for t, n in self.changes if t > settled]
        if not after:
            return
        before = [n for t, n in self.changes if t <= settled]
        counts = [before[-1], *(n for _, n in after)] if before else [n for _, n in after]
        steps = list(itertools.pairwise(counts))
        assert len({b > a for a, b in steps}) <= 1, (
            f"at a steady rate since {self.steady_since - 1_800_000_000:.0f}: {counts}"
        )
        if self.generous:
            assert len(steps) <= 1, (
                f"at a steady rate since {self.steady_since - 1_800_000_000:.0f}: {counts}"
            )


TestAutoscalingModel = AutoscalingModel.TestCase
TestAutoscalingModel.settings = settings(
    max_examples=int(os.environ.get("BATON_MODEL_EXAMPLES", "1000")),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)


# -- what the model check found, pinned ------------------------------------------------------------
# Each sequence is a shrunk counterexample replayed step by step (only steps whose
# preconditions hold), with the invariants checked after each, as hypothesis does.

SMALL = dict(
    tasks=4,
    processes=1,
    standbys=0,
    min_replicas=1,
    max_replicas=3,
    utilization=0.5,
    lag_records=None,
    lag_seconds=None,
    latency=None,
    up_window=0,
    down_window=0,
    generous=False,
)


def _replay(machine: AutoscalingModel, *steps: tuple[str, dict[str, object]]) -> None:
    for name, args in steps:
        getattr(machine, name)(**args)
        machine.active_never_below_the_standby_need()
        machine.steady_rate_changes_at_most_once()


def test_pods_stay_marked_until_they_are_gone() -> None:
    """A scale-in's Pods were unmarked once the StatefulSet went down (Removing): a warmup that
    caught up meanwhile handed one of them actives again, and it went with them."""
    m = AutoscalingModel()
    m.setup(**SMALL, start=1, rate=800.0, flipped=False)
    _replay(
        m,
        ("time_passes", {"dt": 5.0, "noise": -0.04, "reconcile": True}),  # 1 -> 2 (ScalingOut)
        ("rate_changes", {"rate": 0.0}),
        ("time_passes", {"dt": 300.0, "noise": -0.04, "reconcile": False}),
        ("time_passes", {"dt": 300.0, "noise": -0.04, "reconcile": False}),
        ("pods_start", {"color": "blue"}),
        ("reconcile", {"noise": 0.0, "metrics": True}),  # ScaleOutStuck after 600 s; 2 -> 1 (Draining)
        ("pods_ready", {"color": "blue"}),  # the new member joins: warmups
        ("reconcile", {"noise": 0.0, "metrics": True}),  # it owns nothing: Removing
        ("warmups_handed_over", {"color": "blue"}),
        ("pods_go", {"color": "blue"}),
    )
    assert m.replicas["blue"] == 1 and m.world["blue"].owning == 1


def test_a_scale_in_decided_on_a_lower_load_is_cancelled() -> None:
    """Decided at rate 0, the drain completed after the rate had risen: 2 -> 1 -> 3 at a
    steady rate. Now the pass that sees the load first cancels the drain: 2 -> 3."""
    m = AutoscalingModel()
    m.setup(**SMALL, start=2, rate=0.0, flipped=False)
    assert m.state is not None and m.state.step is not None and m.state.step.phase == "Draining"
    _replay(
        m,
        ("marked_pods_release_their_tasks", {}),
        ("rate_changes", {"rate": 800.0}),
        ("time_passes", {"dt": 5.0, "noise": -0.04, "reconcile": True}),
        ("pods_go", {"color": "blue"}),
        ("reconcile", {"noise": -0.04, "metrics": True}),
    )
    assert [n for _, n in m.changes] == [2, 3], m.changes


def test_no_flip_to_a_color_that_still_removes_pods() -> None:
    """The idle color follows the active one down at deploy time without draining. A deploy
    cancelled right after, and a rollback flip to that color before its Pods had gone, made it
    active with Pods about to go that owned its tasks."""
    m = AutoscalingModel()
    m.setup(**SMALL, start=2, rate=0.0, flipped=True)
    _replay(
        m,
        ("marked_pods_release_their_tasks", {}),
        ("reconcile", {"noise": 0.0, "metrics": True}),  # blue: Removing (1)
        ("pods_go", {"color": "blue"}),
        ("reconcile", {"noise": 0.0, "metrics": True}),  # ScaledIn
        ("deploy_starts", {"standbys": 0, "noise": 0.0, "now": 1}),  # green follows blue: 2 -> 1
        ("deploy_stops", {"how": "rollback"}),
    )
    assert m.replicas == {"blue": 1, "green": 1} and m.world["green"].pods == 2
    _replay(m, ("rollback_flip", {}))
    assert m.phase == "Stable", "flipped to green while it still removed a Pod"
    _replay(m, ("pods_go", {"color": "green"}), ("rollback_flip", {}))
    assert m.phase == "RollingBack"
    _replay(
        m,
        ("flip_ends", {"committed": True, "noise": 0.0}),
        ("world_progresses", {"color": "green", "noise": 0.0}),
    )
    assert m.active == "green"


def test_the_idle_color_gets_the_floor_of_the_standbys_it_is_deployed_with() -> None:
    """A deploy raising standbyReplicas to 2 must bring the idle color to 3 Pods before the flip,
    not to the active color's 1 (checked at the commit, before the next pass could fix it)."""
    m = AutoscalingModel()
    m.setup(**SMALL, start=1, rate=0.0, flipped=False)
    _replay(
        m,
        ("deploy_starts", {"standbys": 2, "noise": 0.0, "now": 1}),
        ("deploy_ready", {}),
        ("flip_starts", {}),
    )
    assert m.phase == "Flipping"
    assert m.replicas == {"blue": 1, "green": 3}, "green must carry its 2 standbys before it is active"
    _replay(m, ("flip_ends", {"committed": True, "noise": 0.0}))
    assert m.active == "green"


# -- the pass, by example --------------------------------------------------------------------------

NOW = 1_800_000_000.0


def _inputs(state: AutoscalingState | None, rate: float, pods: int, **kw: Any) -> Inputs:
    """An app of 12 tasks whose Pods each do 500 records/s fully busy, ``pods`` of them owning."""
    processed = min(rate, pods * CAPACITY)
    sample = Sample(
        NOW,
        tuple(TaskSample(f"0_{i}", 0, rate / 12, processed / 12) for i in range(12)),
        tuple(PodSample(f"p{i}", processed / pods, busy=processed / pods / CAPACITY) for i in range(pods)),
    )
    base = Inputs(
        policy=AutoscalingPolicy(
            1, 10, scale_up=ScalingRules(0, GENEROUS), scale_down=ScalingRules(0, GENEROUS)
        ),
        state=state,
        sample=sample,
        now=NOW,
        active="blue",
        colors=("blue", "green"),
        observed=Observed(pods=pods, ready=pods, members=pods, warmups=0, draining_actives=None),
        tasks=12,
        standby_replicas={"blue": 1, "green": 1},
        spec_replicas=3,
    )
    return dataclasses.replace(base, **kw)


def test_a_scale_out_sets_the_count_then_waits_for_ready_pods_and_warmups() -> None:
    p = autoscale(_inputs(None, 2000, 3))
    assert p.replicas == {"blue": 7, "green": 3}  # 2000 / 350 = 5.7: band 6..7, lands on ceil(6.3)
    assert [e.reason for e in p.events] == ["ScaleOutStarted"]
    assert p.state.step is not None and p.state.step.phase == "ScalingOut" and p.requeue_after == 10.0
    # the new Pods are not ready yet; then ready with warmups; then members with no warmups
    p = autoscale(_inputs(p.state, 2000, 3, observed=Observed(pods=7, ready=3)))
    assert p.state.step is not None and p.state.step.phase == "ScalingOut"
    p = autoscale(_inputs(p.state, 2000, 3, observed=Observed(pods=7, ready=7, members=7, warmups=4)))
    assert p.state.step is not None and p.state.step.phase == "WarmingUp"
    p = autoscale(_inputs(p.state, 2000, 7, observed=Observed(pods=7, ready=7, members=7, warmups=0)))
    assert p.state.step is None and [e.reason for e in p.events] == ["ScaledOut"]
    assert p.decision.desired == 7 and not p.decision.acts


def test_a_scale_in_marks_the_pods_that_go_and_lowers_the_count_when_they_own_nothing() -> None:
    state = AutoscalingState(replicas={"blue": 6, "green": 6})
    p = autoscale(_inputs(state, 500, 6))
    assert (p.replicas["blue"], p.drain_ordinals) == (6, (2, 3, 4, 5))  # 500/350 = 1.4: 2 (standbys need 2)
    assert [e.reason for e in p.events] == ["ScaleInStarted"]
    obs = Observed(pods=6, ready=6, members=6, warmups=0, draining_actives=3)
    p = autoscale(_inputs(p.state, 500, 6, observed=obs))
    assert p.replicas["blue"] == 6 and p.state.step is not None and p.state.step.phase == "Draining"
    p = autoscale(_inputs(p.state, 500, 6, observed=Observed(6, 6, 6, 0, 0)))
    assert p.replicas["blue"] == 2 and p.drain_ordinals == (2, 3, 4, 5)  # marked until gone
    p = autoscale(_inputs(p.state, 500, 2, observed=Observed(2, 2, 2, 0, 0)))
    assert p.state.step is None and p.drain_ordinals == () and [e.reason for e in p.events] == ["ScaledIn"]


def test_a_flip_freezes_the_step_and_a_flip_to_the_other_color_supersedes_it() -> None:
    state = AutoscalingState(replicas={"blue": 6, "green": 6})
    p = autoscale(_inputs(state, 500, 6))
    frozen = autoscale(_inputs(p.state, 500, 6, deploy_phase="RollingBack", observed=Observed(6, 6, 6, 0, 0)))
    assert (
        frozen.state.step == p.state.step and frozen.drain_ordinals == p.drain_ordinals and not frozen.events
    )
    assert frozen.decision.held_by == "flip"
    assert (
        flip_hold(p.state, "green", 6) is not None and flip_hold(p.state, "green", 6, rollback=True) is None
    )
    after = autoscale(_inputs(frozen.state, 500, 6, active="green"))
    # blue's drain ends; green, now active, gets a step of its own (its Pods are the ones to mark)
    assert [e.reason for e in after.events] == ["ScaleStepSuperseded", "ScaleInStarted"]
    assert after.state.step is not None and after.state.step.color == "green"


def test_the_idle_color_follows_at_deploy_time_with_its_new_floor() -> None:
    state = AutoscalingState(replicas={"blue": 2, "green": 6})
    p = autoscale(_inputs(state, 500, 2, deploy_phase="Deploying", deploy_target="green"))
    assert p.replicas == {"blue": 2, "green": 2}
    assert flip_hold(p.state, "green", 6) == "green still removes Pods (6 -> 2): the flip waits for it"
    p = autoscale(
        _inputs(
            state,
            500,
            2,
            deploy_phase="Deploying",
            deploy_target="green",
            standby_replicas={"blue": 1, "green": 3},
        )
    )
    assert p.replicas == {"blue": 2, "green": 4}
    # between deploys the idle color keeps its count, raised only to its floor
    p = autoscale(_inputs(state, 500, 2, standby_replicas={"blue": 1, "green": 7}))
    assert p.replicas["green"] == 8
