"""The decision: bounds, HPA-style windows and step policies, holds (:func:`decide`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from .policy import DEPLOY_PHASES, EPS, FLIP_PHASES, AutoscalingPolicy, HeldBy
from .sample import Sample, _n, measure, recommend
from .state import History, Recommendation, ScaleEvent, Step


@dataclass(frozen=True)
class Bounds:
    lo: int
    hi: int
    floor: int  # what the standbys need, whatever the policy says
    why_lo: str
    why_hi: str

    def clamp(self, n: int) -> tuple[int, str]:
        if n < self.lo:
            return self.lo, f"raised to {self.lo} ({self.why_lo})"
        if n > self.hi:
            return self.hi, f"capped at {self.hi} ({self.why_hi})"
        return n, ""


def standby_floor(standby_replicas: int) -> int:
    """A task's active and standbys run on distinct instances."""
    return standby_replicas + 1 if standby_replicas > 0 else 1


def bounds(
    policy: AutoscalingPolicy, tasks: int, standby_replicas: int, processes_per_pod: int = 1
) -> Bounds:
    """minReplicas..maxReplicas, at most one process per task, at least the standby floor.

    The task ceiling beats minReplicas (a Pod beyond it would have nothing to run); the
    standby floor beats everything (the CRD keeps maxReplicas above it)."""
    floor = standby_floor(standby_replicas)
    hi, why_hi = policy.max_replicas, f"maxReplicas {policy.max_replicas}"
    if tasks > 0:
        ceiling = math.ceil(tasks / max(1, processes_per_pod))
        if ceiling < hi:
            per = f" at {processes_per_pod} processes per Pod" if processes_per_pod > 1 else ""
            hi, why_hi = ceiling, f"{tasks} tasks keep at most {ceiling} Pods busy{per}"
    lo, why_lo = min(policy.min_replicas, hi), f"minReplicas {policy.min_replicas}"
    if floor > lo:
        lo, why_lo = floor, f"{standby_replicas} standby(s) per task need {floor} instances"
    if hi < lo:
        hi, why_hi = lo, why_lo
    return Bounds(lo, hi, floor, why_lo, why_hi)


def _longest_period(policy: AutoscalingPolicy) -> float:
    periods = [p.period_seconds for r in (policy.scale_up, policy.scale_down) for p in r.policies]
    return max(periods, default=0.0)


def _record(policy: AutoscalingPolicy, history: History, now: float, replicas: int) -> History:
    keep = max(policy.scale_up.stabilization_window_seconds, policy.scale_down.stabilization_window_seconds)
    recs = tuple(r for r in history.recommendations if r.at > now - keep)
    return replace(
        history,
        recommendations=(*recs, Recommendation(now, replicas)),
        since=history.since if history.since is not None else now,
    )


def with_scale_event(policy: AutoscalingPolicy, history: History, event: ScaleEvent) -> History:
    period = _longest_period(policy)
    events = tuple(e for e in history.scale_events if e.at > event.at - period)
    return replace(history, scale_events=(*events, event))


def stabilise(policy: AutoscalingPolicy, history: History, now: float, current: int) -> tuple[int, int, int]:
    """HPA's stabilisation: (result, lowest of the up window, highest of the down window).

    A window that the recommendations do not cover yet (a new app, metrics back after a gap)
    counts the current count as recommended: nothing moves on less than a full window."""
    up_cut = now - policy.scale_up.stabilization_window_seconds
    down_cut = now - policy.scale_down.stabilization_window_seconds
    ups = [r.replicas for r in history.recommendations if r.at >= up_cut]
    downs = [r.replicas for r in history.recommendations if r.at >= down_cut]
    since = history.since
    if since is None or since > up_cut:
        ups.append(current)
    if since is None or since > down_cut:
        downs.append(current)
    low, high = min(ups, default=current), max(downs, default=current)
    return min(max(current, low), high), low, high


def _changed_in(events: tuple[ScaleEvent, ...], now: float, period: float) -> tuple[int, int]:
    added = removed = 0
    for e in events:
        if e.at > now - period:
            if e.to_replicas > e.from_replicas:
                added += e.to_replicas - e.from_replicas
            else:
                removed += e.from_replicas - e.to_replicas
    return added, removed


def step_limit(
    policy: AutoscalingPolicy, history: History, now: float, current: int, target: int
) -> tuple[int, str]:
    """HPA's scaling policies: how far one period may move (counting the period's earlier steps)."""
    if target == current:
        return target, ""
    up = target > current
    rules = policy.scale_up if up else policy.scale_down
    name = "scaleUp" if up else "scaleDown"
    if rules.select_policy == "Disabled":
        return current, f"; {name} is disabled"
    proposals = []
    for p in rules.policies:
        added, removed = _changed_in(history.scale_events, now, p.period_seconds)
        start = current - added + removed
        if up:
            proposals.append(
                start + p.value if p.type == "Pods" else math.ceil(start * (1 + p.value / 100) - EPS)
            )
        else:
            proposals.append(start - p.value if p.type == "Pods" else int(start * (1 - p.value / 100) + EPS))
    if not proposals:
        return target, ""
    # "Max" is the policy allowing the largest change
    if up:
        limit = max(proposals) if rules.select_policy == "Max" else min(proposals)
        limit = max(limit, current)
        if target > limit:
            return limit, f"; limited to {limit} by behavior.{name}'s policies"
    else:
        limit = min(proposals) if rules.select_policy == "Max" else max(proposals)
        limit = min(limit, current)
        if target < limit:
            return limit, f"; limited to {limit} by behavior.{name}'s policies"
    return target, ""


# -- the decision ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Decision:
    current: int
    desired: int  # where the windows, policies and bounds lead (what a step would go to)
    reason: str  # what a person reads in the Event and in status.autoscaling
    held_by: HeldBy | None = None  # not acting now, and why
    recommendation: int | None = None  # this pass's, from the load alone
    needed: float | None = None
    history: History = field(default_factory=History)

    @property
    def acts(self) -> bool:
        return self.held_by is None and self.desired != self.current


def _hold(deploy_phase: str, step: Step | None, active_ready: bool) -> tuple[HeldBy | None, str]:
    if deploy_phase in FLIP_PHASES:
        return "flip", "a flip is running"
    if deploy_phase in DEPLOY_PHASES:
        return "deploy", "a deploy is in progress"
    if step is not None:
        return "step", f"the step {step.from_replicas} -> {step.to_replicas} is {step.phase}"
    if not active_ready:
        return "unready", "Pods of the active color are failing (more Pods would not fix them)"
    return None, ""


def decide(
    policy: AutoscalingPolicy,
    sample: Sample | None,
    history: History,
    now: float,
    *,
    current: int,
    tasks: int,
    standby_replicas: int,
    processes_per_pod: int = 1,
    deploy_phase: str = "Stable",
    step: Step | None = None,
    active_ready: bool = True,
) -> Decision:
    """How many Pods the active color should run, and whether to act on it now."""
    b = bounds(policy, tasks, standby_replicas, processes_per_pod)
    held, held_text = _hold(deploy_phase, step, active_ready)
    if held == "deploy" and current < b.floor:
        held, held_text = None, ""  # the standby floor does not wait for a deploy
    age = None if sample is None else now - sample.at
    rec = None
    if sample is not None and age is not None and age <= policy.metrics_max_age_seconds:
        load = measure(policy, sample, processes_per_pod)
        rec = recommend(policy, load, current, processes_per_pod)
    if rec is None or rec.replicas is None:
        # no decision from the load: the bounds still hold; the windows start again
        history = replace(history, recommendations=(), since=None)
        why = (
            rec.text
            if rec is not None
            else "no metrics from the workers"
            if age is None
            else f"the newest metrics are {age:.0f}s old"
        )
        target, note = b.clamp(current)
        if target == current and held is None:
            held = "metrics"
        text = f"{why}; {note}" if note else why
        return Decision(
            current, target, _verdict(current, target, held_text, text), held, None, None, history
        )
    bounded, bound_note = b.clamp(rec.replicas)
    history = _record(policy, history, now, bounded)
    stable, low, high = stabilise(policy, history, now, current)
    text = rec.text + (f"; {bound_note}" if bound_note else "")
    if stable != bounded:
        if bounded > current:
            text += f"; the lowest recommendation of the last {_n(policy.scale_up.stabilization_window_seconds)}s is {low}"
        else:
            text += f"; the highest recommendation of the last {_n(policy.scale_down.stabilization_window_seconds)}s is {high}"
    limited, limit_note = step_limit(policy, history, now, current, stable)
    target, final_note = b.clamp(limited)
    text += limit_note + (f"; {final_note}" if final_note and final_note != bound_note else "")
    return Decision(
        current, target, _verdict(current, target, held_text, text), held, rec.replicas, rec.needed, history
    )


def _verdict(current: int, target: int, held_text: str, text: str) -> str:
    """``scale out 3 -> 5 (held: a deploy is in progress): input 1,200 records/s, ...``"""
    head = (
        f"keep {current}"
        if target == current
        else f"scale {'out' if target > current else 'in'} {current} -> {target}"
    )
    if held_text:
        head += f" (held: {held_text})"
    return f"{head}: {text}"


# -- the scaling step -----------------------------------------------------------------------
