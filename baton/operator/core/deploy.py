"""The deploy/flip state machine: a pure function from what the operator sees to what it does.

Inputs are the StreamApp's spec revision and upgrade settings, its ``status.deploy`` record
(:mod:`baton.operator.core.deploy_record`), the active color, what each color's StatefulSet and
consumer group report (ready, lag), what the control topic says, the promote/rollback
annotations, the outcome of a flip that just ran, and the time. The output is a
:class:`Plan`: the next record (which revision and application id generation each color
runs), the phase, a flip to run or not, Events, the Stalled reason, and when to look again.

Nothing here talks to Kubernetes or Kafka, so every path (timeouts, aborted flips, restarts
in the middle of a flip, rollbacks, external ``baton flip``) is unit-tested without a
cluster; :mod:`baton.operator.reconcile` feeds it and carries out the plan.

BlueGreen, for a spec change to revision R while color A is active:

    Deploying    the idle color I gets R (a new application id generation under Rebuild);
                 wait until its Pods are Ready and its lag <= maxLagToPromote
    Promoting    ... and stays so for promotionStableSeconds (then, with autoPromote false,
                 until the ``baton.dev/promote`` annotation)
    Flipping     the flip to I runs; aborted flips are retried with back-off, a refusal
                 (a topology that cannot flip exactly) abandons the deploy
    Stable       I is active; A keeps the old revision for standbyUpgradeDelaySeconds as
                 a rollback target, then gets R too

Not promotable within promotionTimeoutSeconds: the deploy is abandoned (Stalled), A stays
active. ``baton.dev/rollback`` flips back (RollingBack); a rolled-back revision is never
promoted again automatically: a new spec, or ``baton.dev/promote``, resumes.

Flips are idempotent by target: the coordinator returns "already active" for a flip to the
color in force, so replaying a flip after a restart can never flip twice.

Why one module of this size: it is one state machine, and its transitions are only
reviewable side by side (the model checks in tests/unit/operator/core/test_flip_model.py walk all of them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from baton.control.messages import COLORS, Color, other
from baton.operator.core.deploy_record import Assignment, DeployRecord, Phase
from baton.operator.core.spec import UpgradeSpec

ANNOTATION_PROMOTE = "baton.dev/promote"
ANNOTATION_ROLLBACK = "baton.dev/rollback"

# How often to look again while something is in motion, and when all is quiet.
BUSY_REQUEUE_S = 2.0
IDLE_REQUEUE_S = 30.0
# Back-off of flip retries after an abort (a worker missed the deadline): 5, 10, 20, 40, 60 s.
RETRY_BASE_S = 5.0
RETRY_MAX_S = 60.0
# A flip held by an autoscaling step looks again this often (a step moves within seconds).
SCALE_HOLD_REQUEUE_S = 5.0

StatusPhase = Literal["Deploying", "Promoting", "Flipping", "RollingBack", "Stable", "Stalled"]
Outcome = Literal["promoted", "abandoned", "rolled_back"]


@dataclass(frozen=True)
class ColorView:
    """One color as observed: Pods Ready at its assigned revision, consumer lag, why not."""

    ready: bool
    lag: int | None = None
    message: str = ""
    exists: bool = True  # its StatefulSet exists (a color never created has nothing to keep)
    # what the observation is of; a view of an older assignment says nothing about a new one
    # (the pass that gives a color a new revision or generation must not read it as ready)
    assignment: Assignment | None = None


@dataclass(frozen=True)
class FlipOutcome:
    """The result of one flip (``baton.control.coordinator.FlipResult``, or a failure)."""

    to: Color
    committed: bool
    epoch: int = 0
    reason: str = ""
    refused: bool = False  # a worker refused: retrying cannot help
    draining: bool = False  # committed, but the old active has not drained below the cut yet


@dataclass(frozen=True)
class Inputs:
    colors: tuple[Color, ...]  # the colors that run: both, or blue alone under Rolling
    upgrade: UpgradeSpec
    revision: str  # spec_hash of the current spec
    spec: str  # the current spec, as stored in record.specs
    record: DeployRecord | None
    active: Color
    views: dict[Color, ColorView]
    now: float
    control_active: Color | None = None  # the control topic's active color, when read
    control_epoch: int | None = None  # the epoch of the state in force there, when read
    # partitions the old active still owes below the cut of the flip in force (control topic):
    # until they drain, no flip runs and the idle color keeps its revision and generation
    draining: tuple[str, ...] = ()
    promote: bool = False
    rollback: bool = False
    flip_running: bool = False  # a flip of this app is running in this process right now
    flip: FlipOutcome | None = None  # a flip that just ended
    # spec.autoscaling (autoscaling.flip_hold): why a deploy's flip waits (a scale step runs,
    # or its target still removes Pods), and why a rollback's does (only the latter); "": none
    scale_hold: str = ""
    scale_hold_rollback: str = ""


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Plan:
    record: DeployRecord
    active: Color
    phase: StatusPhase
    message: str
    flip: Color | None = None  # run a flip to this color now
    roll: bool = False  # Rolling: restart outdated Pods one at a time
    events: tuple[Event, ...] = ()
    stalled_reason: str = ""  # non-empty: Stalled=True with this reason and ``message``
    clear_annotations: tuple[str, ...] = ()
    outcome: tuple[Outcome, float] | None = None  # a deploy ended: how, and its duration
    requeue_after: float = IDLE_REQUEUE_S

    @property
    def flip_in_progress(self) -> bool:
        return self.phase in ("Flipping", "RollingBack")


@dataclass
class _Step:
    """The plan being built (mutable inside :func:`plan` only)."""

    inp: Inputs
    rec: DeployRecord
    active: Color
    events: list[Event] = field(default_factory=list)
    clear: list[str] = field(default_factory=list)
    outcome: tuple[Outcome, float] | None = None
    flip: Color | None = None
    requeue: float = IDLE_REQUEUE_S
    message: str = ""

    def event(self, reason: str, message: str, warning: bool = False) -> None:
        self.events.append(Event("Warning" if warning else "Normal", reason, message))

    def soon(self, seconds: float = BUSY_REQUEUE_S) -> None:
        self.requeue = min(self.requeue, max(0.5, seconds))

    def assign(self, color: Color, assignment: Assignment) -> None:
        self.rec = self.rec.with_(colors={**self.rec.colors, color: assignment})

    def ended(self, outcome: Outcome) -> None:
        started = self.rec.started_at
        self.outcome = (outcome, max(0.0, self.inp.now - started) if started is not None else 0.0)


def plan(inp: Inputs) -> Plan:
    """What to do next for one StreamApp (see the module docstring)."""
    s = _Step(inp, _normalise(inp), inp.active if inp.active in inp.colors else inp.colors[0])
    if len(inp.colors) == 1:
        if inp.rollback:
            s.clear.append(ANNOTATION_ROLLBACK)
        _rolling(s)
        return _finish(s)
    if inp.flip is not None:
        _flip_ended(s, inp.flip)
    _control_topic(s)
    if inp.draining and not inp.flip_running:
        # A new flip now would drop what the old active still owes (lost records), and a new
        # revision under Rebuild would restart it from offset 0 (records emitted twice): wait.
        # The rollback annotation stays, so a rollback asked for now runs once it has drained.
        s.message = (
            f"waiting for {other(s.active)} to emit everything below the cut on "
            f"{', '.join(inp.draining)} before anything else"
        )
        s.soon()
        return _finish(s)
    if inp.rollback:
        s.clear.append(ANNOTATION_ROLLBACK)
    if s.rec.flip_to is not None:
        # A flip is decided: wait for it, or (after a restart) run it again; the coordinator
        # answers "already active" if it had committed, so this never flips twice.
        if not inp.flip_running:
            s.flip = s.rec.flip_to
        s.soon(1.0)
        return _finish(s)
    if inp.rollback and (_rollback(s) or s.flip is not None):
        return _finish(s)
    _spec_change(s)
    _progress(s)
    return _finish(s)


def _normalise(inp: Inputs) -> DeployRecord:
    """The stored record, or a fresh one, with an assignment for every running color."""
    rec = inp.record
    exist = tuple(c for c in inp.colors if inp.views.get(c, ColorView(False)).exists)
    if rec is None:
        fresh = Assignment(inp.revision)
        return DeployRecord(
            colors=dict.fromkeys(inp.colors, fresh), specs={inp.revision: inp.spec}, created=exist
        )
    active = inp.active if inp.active in rec.colors else next(iter(rec.colors))
    colors = {c: rec.colors.get(c) or rec.colors[active] for c in inp.colors}
    created = tuple(c for c in COLORS if c in rec.created or c in exist)
    for color in inp.colors:
        view = inp.views.get(color)
        if view is not None and not view.exists and color == inp.active and color not in created:
            # never created (or a spec the cluster refused): no state and no output to protect.
            # A color that existed and was deleted keeps its revision: it is recreated as it
            # was, and a deploy under way still goes through the idle color and a flip.
            colors[color] = Assignment(inp.revision, colors[color].generation)
    return rec.with_(colors=colors, specs={**rec.specs, inp.revision: inp.spec}, created=created)


def _became_active(s: _Step, to: Color, how: str) -> None:
    """``to`` is now active (a committed flip, ours or someone else's)."""
    rec, old = s.rec, s.active
    s.active = to
    if rec.target == to and rec.revision:
        s.ended("promoted")
        standby = old if rec.colors[old].revision != s.inp.revision else None
        s.event("Promoted", f"{to} (revision {rec.revision}) is active {how}; {old} stays a rollback target")
        s.rec = rec.with_(target=None, standby=standby, flipped_at=s.inp.now, ready_since=None, abandoned="")
    else:
        rolled = rec.colors[to].revision != s.inp.revision
        if rolled or rec.target is not None:
            s.ended("rolled_back")
        s.event("RolledBack", f"{to} (revision {rec.colors[to].revision}) is active again {how}")
        s.rec = rec.with_(
            target=None,
            standby=None,
            ready_since=None,
            rolled_back=s.inp.revision if rolled else "",
        )
    s.rec = s.rec.with_(flip_to=None, retry_at=None, flip_attempts=0, phase="Stable")


def _control_topic(s: _Step) -> None:
    """The control topic is the truth about who is active: follow flips made elsewhere.

    A read older than the flip that just ended says nothing about it (it may predate the
    commit). A newer one wins over that flip's outcome: when our flip aborted while a
    ``baton flip`` by hand committed, the app is on the other color all the same, and
    taking it for idle would rebuild the active color (found by the model check).
    """
    seen, flip = s.inp.control_active, s.inp.flip
    if seen is None or seen == s.active:
        return
    if flip is not None and (s.inp.control_epoch is None or s.inp.control_epoch < flip.epoch):
        return
    if s.rec.flip_to == seen:
        _became_active(s, seen, "(the flip committed before the operator could record it)")
    else:
        s.event("ExternalFlip", f"the control topic says {seen} is active: flipped outside the operator")
        _became_active(s, seen, "(flipped outside the operator)")


def _flip_ended(s: _Step, flip: FlipOutcome) -> None:
    if flip.committed:
        _became_active(s, flip.to, f"after flip epoch {flip.epoch}")
        if flip.draining:
            s.event("FlipDraining", f"flip epoch {flip.epoch} committed; {flip.reason}", warning=True)
        return
    rolling_back = s.rec.phase == "RollingBack"
    s.event("FlipAborted", f"flip to {flip.to} (epoch {flip.epoch}) aborted: {flip.reason}", warning=True)
    s.rec = s.rec.with_(flip_to=None)
    if rolling_back:
        s.rec = s.rec.with_(phase="Stable")
        s.event("RollbackFailed", f"{s.active} stays active; annotate {ANNOTATION_ROLLBACK} to retry", True)
        return
    attempts = s.rec.flip_attempts + 1
    if flip.refused:
        s.rec = s.rec.with_(
            flip_attempts=attempts,
            abandoned=f"the flip to {flip.to} was refused: {flip.reason}",
            phase="Stable",
        )
        s.event("DeployAbandoned", s.rec.abandoned, warning=True)
        s.ended("abandoned")
        return
    delay = min(RETRY_MAX_S, RETRY_BASE_S * 2 ** (attempts - 1))
    s.rec = s.rec.with_(phase="Promoting", flip_attempts=attempts, retry_at=s.inp.now + delay)


def _rollback(s: _Step) -> bool:
    """Roll back; True when the rollback waits (for the autoscaler's step)."""
    rec, idle = s.rec, other(s.active)
    if rec.target == idle and rec.revision:
        # Nothing was flipped yet: rolling back means not promoting this revision.
        s.ended("rolled_back")
        s.event(
            "RolledBack",
            f"deploy of revision {rec.revision} stopped before its flip; {s.active} stays active",
        )
        s.rec = rec.with_(target=None, ready_since=None, rolled_back=rec.revision, phase="Stable")
        return False
    if s.inp.scale_hold_rollback:
        # the annotation stays: the rollback runs once the Pods that go are gone
        s.clear.remove(ANNOTATION_ROLLBACK)
        s.message = f"rolling back to {idle} once the scale step ends: {s.inp.scale_hold_rollback}"
        s.soon(SCALE_HOLD_REQUEUE_S)
        return True
    s.event("RollbackStarted", f"flipping back to {idle} (revision {rec.colors[idle].revision})")
    s.rec = rec.with_(flip_to=idle, phase="RollingBack", standby=None)
    s.flip = idle
    s.soon(1.0)
    return False


def _new_generation(s: _Step, color: Color, revision: str) -> int:
    """Reuse keeps a color's state; Rebuild starts a fresh application id generation."""
    current = s.rec.colors[color]
    if s.inp.upgrade.state_migration == "Rebuild" and current.revision != revision:
        return max(a.generation for a in s.rec.colors.values()) + 1
    return current.generation


def _spec_change(s: _Step) -> None:
    inp, rec, active = s.inp, s.rec, s.active
    idle, revision = other(active), inp.revision
    if rec.colors[active].revision != revision:
        rearm = inp.promote and (rec.rolled_back == revision or (rec.abandoned and rec.revision == revision))
        if rec.rolled_back == revision and not rearm:
            return  # rolled back by the user: wait for a new spec or an explicit promote
        if rec.target == idle and rec.revision == revision and rec.colors[idle].revision == revision:
            if rearm:
                s.clear.append(ANNOTATION_PROMOTE)
                s.event("DeployResumed", f"promotion of revision {revision} to {idle} requested")
                s.rec = rec.with_(started_at=inp.now, abandoned="", rolled_back="", ready_since=None)
            return
        if rec.colors[idle].revision == revision and rec.rolled_back == revision:
            s.clear.append(ANNOTATION_PROMOTE)
            s.event("DeployResumed", f"promotion of revision {revision} to {idle} requested")
        else:
            verb = "superseded by" if rec.target is not None else "started:"
            s.event(
                "DeployStarted",
                f"deploy {verb} revision {revision} to {idle} "
                f"(stateMigration {inp.upgrade.state_migration}); {active} stays active",
            )
        s.assign(idle, Assignment(revision, _new_generation(s, idle, revision)))
        s.rec = s.rec.with_(
            target=idle,
            revision=revision,
            started_at=inp.now,
            ready_since=None,
            abandoned="",
            rolled_back="",
            retry_at=None,
            flip_attempts=0,
            standby=None,
            phase="Deploying",
        )
        return
    # The active color runs the spec: bring the idle one to it (now, or after the delay).
    if rec.target is not None:
        s.event("DeployCancelled", f"the spec is back at revision {revision}, which {active} runs")
        s.rec = rec = rec.with_(target=None, ready_since=None, abandoned="", retry_at=None, phase="Stable")
    if rec.rolled_back:
        s.rec = rec = rec.with_(rolled_back="")
    if rec.colors[idle].revision == revision:
        s.rec = rec.with_(standby=None)
        return
    if rec.standby == idle and rec.flipped_at is not None:
        due = rec.flipped_at + inp.upgrade.standby_upgrade_delay_seconds
        if inp.now < due:
            s.message = f"{idle} keeps revision {rec.colors[idle].revision} as a rollback target for {due - inp.now:.0f}s"
            s.soon(due - inp.now)
            return
        s.event("StandbyUpgraded", f"{idle} brought to revision {revision} after standbyUpgradeDelaySeconds")
    s.assign(idle, Assignment(revision, _new_generation(s, idle, revision)))
    s.rec = s.rec.with_(standby=None)


def _view(s: _Step, color: Color) -> ColorView:
    """The color's view, if it is of the color's current assignment; else not ready, lag unknown."""
    view = s.inp.views.get(color, ColorView(False))
    if view.assignment is not None and view.assignment != s.rec.colors.get(color):
        return ColorView(False, None, "just updated", view.exists, view.assignment)
    return view


def _why_not_ready(view: ColorView, max_lag: int) -> str:
    if not view.ready:
        return view.message or "Pods not ready"
    if view.lag is None:
        return "lag unknown (no committed offsets yet)"
    return f"lag {view.lag} > maxLagToPromote {max_lag}"


def _progress(s: _Step) -> None:
    """A deploy to the idle color: wait until ready and caught up, stably; then flip."""
    inp, rec = s.inp, s.rec
    idle, up = other(s.active), inp.upgrade
    if rec.target != idle or rec.revision != inp.revision or rec.abandoned or rec.rolled_back:
        return
    view = _view(s, idle)
    ok = view.ready and view.lag is not None and view.lag <= up.max_lag_to_promote
    ready_since = (rec.ready_since or inp.now) if ok else None
    stable = ready_since is not None and inp.now - ready_since >= up.promotion_stable_seconds
    started = rec.started_at if rec.started_at is not None else inp.now
    s.rec = rec = rec.with_(ready_since=ready_since, started_at=started)
    if view.ready:
        s.soon()  # lag and the stable period are polled
    else:
        # readiness arrives as a StatefulSet event, which wakes the loop (no polling of
        # hundreds of deploying apps): look again by the promotion timeout at the latest
        s.soon(up.promotion_timeout_seconds - (inp.now - started))
    if not stable and inp.now - started >= up.promotion_timeout_seconds:
        why = _why_not_ready(view, up.max_lag_to_promote) if ready_since is None else "not stable long enough"
        reason = f"{idle} not ready and caught up within promotionTimeoutSeconds ({up.promotion_timeout_seconds}s): {why}"
        s.rec = rec.with_(abandoned=reason, phase="Stable")
        s.event("DeployAbandoned", f"{reason}; {s.active} stays active", warning=True)
        s.ended("abandoned")
        return
    if not stable:
        if ready_since is None:
            s.rec = rec.with_(phase="Deploying")
            s.message = (
                f"deploying revision {rec.revision} to {idle}: {_why_not_ready(view, up.max_lag_to_promote)}"
            )
        else:
            left = up.promotion_stable_seconds - (inp.now - ready_since)
            s.rec = rec.with_(phase="Promoting")
            s.message = f"{idle} ready with lag {view.lag}; promoting when stable for {left:.0f}s more"
            s.soon(left)
        return
    if rec.retry_at is not None and inp.now < rec.retry_at:
        s.rec = rec.with_(phase="Promoting")
        s.message = f"flip to {idle} failed {rec.flip_attempts}x; retrying in {rec.retry_at - inp.now:.0f}s"
        s.soon(rec.retry_at - inp.now)
        return
    if not (up.auto_promote or inp.promote):
        s.rec = rec.with_(phase="Promoting")
        s.message = (
            f"{idle} ready and caught up; annotate {ANNOTATION_PROMOTE}=true to flip (autoPromote is false)"
        )
        return
    if inp.scale_hold:
        s.rec = rec.with_(phase="Promoting")
        s.message = f"{idle} ready and caught up; {inp.scale_hold}"
        s.soon(SCALE_HOLD_REQUEUE_S)
        return
    if inp.promote:
        s.clear.append(ANNOTATION_PROMOTE)
    s.event(
        "FlipStarted",
        f"flipping to {idle}: ready, lag {view.lag} <= {up.max_lag_to_promote} for {up.promotion_stable_seconds}s",
    )
    s.rec = rec.with_(phase="Flipping", flip_to=idle, retry_at=None)
    s.flip = idle
    s.soon(1.0)


def _rolling(s: _Step) -> None:
    """One color: its Pods are restarted one at a time by the reconciler (OnDelete)."""
    inp, rec, color = s.inp, s.rec, s.active
    if inp.rollback:
        s.event(
            "RollbackUnsupported", "upgrade.strategy Rolling has one color: nothing to flip back to", True
        )
    if rec.colors[color].revision != inp.revision:
        s.event("DeployStarted", f"rolling revision {inp.revision} out to {color}, one Pod at a time")
        s.assign(color, Assignment(inp.revision, rec.colors[color].generation))
        s.rec = s.rec.with_(
            target=color, revision=inp.revision, started_at=inp.now, abandoned="", phase="Deploying"
        )
    rec = s.rec
    if rec.target != color or rec.abandoned:
        return
    view = _view(s, color)
    started = rec.started_at if rec.started_at is not None else inp.now
    if view.ready:
        s.ended("promoted")
        s.event("Deployed", f"every Pod of {color} runs revision {rec.revision} and is ready")
        s.rec = rec.with_(target=None, phase="Stable")
    elif inp.now - started >= inp.upgrade.promotion_timeout_seconds:
        reason = f"{color} not rolled out within promotionTimeoutSeconds ({inp.upgrade.promotion_timeout_seconds}s): {view.message}"
        s.rec = rec.with_(abandoned=reason, phase="Stable")
        s.event("DeployAbandoned", reason, warning=True)
        s.ended("abandoned")
    else:
        s.rec = rec.with_(phase="Deploying")
        s.message = f"rolling revision {rec.revision} out to {color}: {view.message}"
        s.soon(inp.upgrade.promotion_timeout_seconds - (inp.now - started))  # else events wake it


def _finish(s: _Step) -> Plan:
    rec, inp = s.rec, s.inp
    stalled_reason, message = "", s.message
    phase: StatusPhase = rec.phase
    if rec.abandoned and rec.revision == inp.revision and rec.target is not None:
        phase, stalled_reason, message = "Stalled", "DeployAbandoned", rec.abandoned
    elif (
        rec.rolled_back and rec.rolled_back == inp.revision and rec.colors[s.active].revision != inp.revision
    ):
        stalled_reason = "RolledBack"
        message = (
            f"revision {inp.revision} was rolled back: {s.active} runs revision "
            f"{rec.colors[s.active].revision}; change the spec, or annotate {ANNOTATION_PROMOTE}=true"
        )
    if phase == "Stable":
        # Ready (and the phase) follow the active color, which serves; the idle color's
        # upgrade or failure is the status's StandbyReady condition, not a deploy.
        active_view = inp.views.get(s.active, ColorView(False))
        idle_views = {c: inp.views.get(c, ColorView(False)) for c in inp.colors if c != s.active}
        # (no fast requeue for a color that is not ready: its StatefulSet's events wake the loop)
        if not active_view.ready:
            phase = "Deploying"
            message = message or f"{s.active}: {active_view.message}"
        elif any(not v.ready for v in idle_views.values()):
            message = message or f"{s.active} active; " + "; ".join(
                f"{c} (standby): {v.message}" for c, v in idle_views.items() if not v.ready
            )
    roll = len(inp.colors) == 1 and rec.target is not None and not rec.abandoned
    if inp.promote and (rec.target is None or len(inp.colors) == 1):
        s.clear.append(ANNOTATION_PROMOTE)  # nothing to promote
    if not message:
        message = f"{s.active} active; " + ", ".join(
            f"{c} revision {rec.colors[c].revision}" for c in inp.colors
        )
    stored: Phase = rec.phase if phase != "Stalled" else "Stable"
    # keep the text of the revisions some color runs (the current one always: newest wins)
    in_use = {a.revision for a in rec.colors.values()}
    specs = {r: text for r, text in rec.specs.items() if r in in_use}
    return Plan(
        record=rec.with_(phase=stored, specs=specs),
        active=s.active,
        phase=phase,
        message=message,
        flip=s.flip,
        roll=roll,
        events=tuple(s.events),
        stalled_reason=stalled_reason,
        clear_annotations=tuple(dict.fromkeys(s.clear)),
        outcome=s.outcome,
        requeue_after=s.requeue,
    )
