"""One reconcile pass of the autoscaler: the scaling step as a state machine (:func:`autoscale`)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

from baton.control.messages import Color

from .decide import Decision, bounds, decide, standby_floor, with_scale_event
from .policy import DEPLOY_PHASES, EPS, FLIP_PHASES, IDLE_REQUEUE_S, STEP_REQUEUE_S, AutoscalingPolicy
from .sample import Sample, _n
from .state import AutoscalingState, ScaleEvent, Step


@dataclass(frozen=True)
class Observed:
    """The active color as the reconciler sees it this pass."""

    pods: int  # its Pods that exist
    ready: int  # ... and are Ready
    members: int | None = None  # its consumer group's members (DescribeGroups); None: unknown
    warmups: int | None = None  # warmup copies its group's last assignment placed; None: unknown
    draining_actives: int | None = None  # active tasks the Pods marked to go still own
    failing: str = ""  # Pods that cannot run without a person (status' PodsFailing message)


@dataclass(frozen=True)
class Inputs:
    policy: AutoscalingPolicy
    state: AutoscalingState | None
    sample: Sample | None
    now: float
    active: Color
    colors: tuple[Color, ...]
    observed: Observed
    tasks: int
    standby_replicas: Mapping[Color, int]  # of the revision each color runs
    spec_replicas: int = 1  # where the colors start when autoscaling is turned on
    processes_per_pod: int = 1
    deploy_phase: str = "Stable"
    deploy_target: Color | None = None  # the color a deploy brings a revision to


@dataclass(frozen=True)
class Event:
    type: Literal["Normal", "Warning"]
    reason: str
    message: str


@dataclass(frozen=True)
class Pass:
    state: AutoscalingState
    decision: Decision
    replicas: dict[Color, int]  # each color's StatefulSet replicas
    drain_ordinals: tuple[int, ...]  # Pods of the active color to mark: their tasks move away
    events: tuple[Event, ...]
    requeue_after: float


def flip_hold(
    state: AutoscalingState | None, to: Color, to_pods: int | None = None, *, rollback: bool = False
) -> str | None:
    """Why a flip to ``to`` should wait; None: it may run.

    A deploy's flip waits for a running scale step (a rollback does not: it supersedes the
    step). Every flip waits while ``to`` still removes Pods (``to_pods``, its Pods that exist,
    above its count): the idle color follows the active one down at deploy time without
    draining, and a Pod that goes must not own the new active's tasks (the model check)."""
    if state is None:
        return None
    want = state.replicas.get(to)
    if to_pods is not None and want is not None and to_pods > want:
        return f"{to} still removes Pods ({to_pods} -> {want}): the flip waits for it"
    s = state.step
    if s is None or rollback:
        return None
    return f"the scale step {s.from_replicas} -> {s.to_replicas} of {s.color} is {s.phase}: the flip waits for it"


def initial_state(inp: Inputs) -> AutoscalingState:
    return AutoscalingState(replicas=dict.fromkeys(inp.colors, max(1, inp.spec_replicas)))


def drain_ordinals(step: Step | None) -> tuple[int, ...]:
    """The Pods to mark: from Draining until they are gone. (Unmarked while Removing, a Pod
    about to go was handed actives again when a warmup caught up: the model check.)"""
    if step is None or step.phase not in ("Draining", "Removing"):
        return ()
    return tuple(range(step.to_replicas, step.from_replicas))


def _advance(
    inp: Inputs, step: Step, replicas: dict[Color, int], events: list[Event], needs: int | None
) -> tuple[Step | None, dict[Color, int]]:
    """One transition of a running step (never called while a flip runs).

    ``needs``: the Pods this pass's load needs (ceil, within the bounds), when known."""
    obs, now, timeout = inp.observed, inp.now, inp.policy.step_timeout_seconds
    late = now - step.phase_since >= timeout
    a, b, color = step.from_replicas, step.to_replicas, step.color
    if step.phase == "ScalingOut":
        if obs.pods >= b and obs.ready >= b:
            return replace(step, phase="WarmingUp", phase_since=now), replicas
        if late:
            events.append(
                Event(
                    "Warning",
                    "ScaleOutStuck",
                    f"{color}: {obs.ready}/{b} Pods ready after {_n(timeout)}s (Pending? see the Pods' events); "
                    "they join the group when they start",
                )
            )
            return None, replicas
    elif step.phase == "WarmingUp":
        members = b * max(1, inp.processes_per_pod)
        if obs.members is not None and obs.members >= members and obs.warmups == 0:
            events.append(
                Event("Normal", "ScaledOut", f"{color}: {a} -> {b} replicas; the new members own their tasks")
            )
            return None, replicas
        if late:
            events.append(
                Event(
                    "Warning",
                    "ScaleOutSlow",
                    f"{color}: {b} replicas, but after {_n(timeout)}s the group has {obs.members} members and "
                    f"{obs.warmups} warmups still catching up; the new Pods stay",
                )
            )
            return None, replicas
    elif step.phase == "Draining":
        if needs is not None and needs > b:
            # decided on a lower load; going on would remove Pods and add them back (model check)
            events.append(
                Event(
                    "Normal",
                    "ScaleInCancelled",
                    f"{color}: the load now needs {needs} replicas, more than {b}: the Pods {b}..{a - 1} stay",
                )
            )
            return None, replicas
        if obs.draining_actives == 0:
            return replace(step, phase="Removing", phase_since=now), {**replicas, color: b}
        if late:
            events.append(
                Event(
                    "Warning",
                    "ScaleInAborted",
                    f"{color}: the Pods {b}..{a - 1} still own {obs.draining_actives} active task(s) after "
                    f"{_n(timeout)}s; they stay ({a} replicas)",
                )
            )
            return None, replicas
    elif step.phase == "Removing" and obs.pods <= b:
        events.append(
            Event("Normal", "ScaledIn", f"{color}: {a} -> {b} replicas; their tasks moved before they went")
        )
        return None, replicas
    return step, replicas


def autoscale(inp: Inputs) -> Pass:
    """One reconcile pass of the autoscaler (see the module docstring)."""
    state = inp.state or initial_state(inp)
    active, now = inp.active, inp.now
    replicas = {
        c: state.replicas.get(c, state.replicas.get(active, max(1, inp.spec_replicas))) for c in inp.colors
    }
    events: list[Event] = []
    flipping = inp.deploy_phase in FLIP_PHASES
    step = state.step
    if not flipping and step is not None and step.color != active:
        events.append(
            Event(
                "Normal",
                "ScaleStepSuperseded",
                f"{step.color} stopped being active during its step {step.from_replicas} -> "
                f"{step.to_replicas} ({step.phase}); {active} runs {replicas[active]}",
            )
        )
        step = None
    standbys = inp.standby_replicas.get(active, 0)

    def decision_for(step: Step | None) -> Decision:
        return decide(
            inp.policy,
            inp.sample,
            state.history,
            now,
            current=replicas[active],
            tasks=inp.tasks,
            standby_replicas=standbys,
            processes_per_pod=inp.processes_per_pod,
            deploy_phase=inp.deploy_phase,
            step=step,
            active_ready=not inp.observed.failing,
        )

    # decide first: a step's transition may depend on what the load needs now
    decision = decision_for(step)
    if not flipping and step is not None:
        needs = None
        if decision.needed is not None:
            hi = bounds(inp.policy, inp.tasks, standbys, inp.processes_per_pod).hi
            needs = min(math.ceil(decision.needed - EPS), hi)
        step, replicas = _advance(inp, step, replicas, events, needs)
        if step is None:
            decision = decision_for(None)  # the same pass may start the next step
    current = replicas[active]
    history, last = decision.history, state.last_scale_time
    if step is None and not flipping and decision.acts:
        to = decision.desired
        history = with_scale_event(inp.policy, history, ScaleEvent(now, current, to))
        last = now
        if to > current:
            step = Step(active, "ScalingOut", current, to, now, now, decision.reason)
            replicas[active] = to
            events.append(Event("Normal", "ScaleOutStarted", f"{active}: {decision.reason}"))
        else:
            step = Step(active, "Draining", current, to, now, now, decision.reason)
            events.append(Event("Normal", "ScaleInStarted", f"{active}: {decision.reason}"))
    elif (
        step is None
        and decision.held_by in ("deploy", "flip")
        and decision.desired != current
        and (state.held_by != decision.held_by or state.desired != decision.desired)
    ):
        events.append(Event("Normal", "ScalingHeld", f"{active}: {decision.reason}"))
    # the idle color: the active color's count when a deploy brings it a revision, and never
    # below the floor of the revision it runs (a rollback may make it active at any time)
    for c in inp.colors:
        if c == active:
            continue
        floor = standby_floor(inp.standby_replicas.get(c, 0))
        if inp.deploy_phase in DEPLOY_PHASES and inp.deploy_target == c:
            replicas[c] = max(replicas[active], floor)
        elif replicas[c] < floor:
            replicas[c] = floor
    new_state = AutoscalingState(
        replicas=dict(replicas),
        history=history,
        step=step,
        desired=decision.desired,
        reason=decision.reason,
        held_by=decision.held_by,
        last_scale_time=last,
    )
    return Pass(
        state=new_state,
        decision=decision,
        replicas=dict(replicas),
        drain_ordinals=drain_ordinals(step),
        events=tuple(events),
        requeue_after=STEP_REQUEUE_S if step is not None or flipping else IDLE_REQUEUE_S,
    )
