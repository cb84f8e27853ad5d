"""One sample of the workers' metrics, what it says (:func:`measure`), and the formula (:func:`recommend`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from .policy import EPS, MIN_TOTAL_UTILIZATION, AutoscalingPolicy

# -- one sample of the workers' metrics -----------------------------------------------------


@dataclass(frozen=True)
class TaskSample:
    """One task of the active color, over the sample's rate window."""

    task: str
    lag: int  # records behind the end of its input partitions
    input_rate: float  # records/s appended to its input partitions
    processed_rate: float  # records/s its active processed


@dataclass(frozen=True)
class PodSample:
    """One Pod of the active color (its processes summed, busy fractions averaged)."""

    pod: str
    processed_rate: float
    busy: float | None = None  # fraction of time the processing loops worked (0..1)
    cpu: float | None = None  # CPU used / CPU the Pod may use (0..1): used when busy is unknown
    latency_p99_seconds: float | None = None

    @property
    def utilization(self) -> float | None:
        value = self.busy if self.busy is not None else self.cpu
        return None if value is None else min(1.0, max(0.0, value))


@dataclass(frozen=True)
class Sample:
    at: float
    tasks: tuple[TaskSample, ...]
    pods: tuple[PodSample, ...]


@dataclass(frozen=True)
class Load:
    """What a sample says, in the terms of the formula (also what status shows)."""

    input_rate: float
    processed_rate: float
    capacity: float | None  # records/s one Pod processes fully busy; None: idle or unknown
    utilization: float | None  # mean busy fraction of the Pods that report one
    excess_lag: int  # records over the lag target, summed over the tasks that process
    over_target: tuple[str, ...]  # tasks over their lag target that process
    stalled: tuple[str, ...]  # tasks over their lag target that process nothing
    latency_p99_seconds: float | None
    hot_task: tuple[str, float] | None  # a task whose input alone exceeds one process at the target
    # "busy": the Pods' busy fraction (or CPU); "processed": neither is reported (the operator's
    # own sample, offsets only) and tasks over their lag target say the Pods are saturated, so
    # a Pod's capacity is taken as the processed rate per Pod
    basis: str = "busy"


def allowed_lag(policy: AutoscalingPolicy, task: TaskSample) -> float | None:
    """The lag a task may carry: the tightest of the targets (None: no lag target)."""
    limits: list[float] = []
    if policy.lag_records is not None:
        limits.append(float(policy.lag_records))
    for seconds in (policy.lag_seconds, policy.latency_p99_seconds):
        if seconds is not None:
            limits.append(seconds * task.input_rate)
    return min(limits) if limits else None


def measure(policy: AutoscalingPolicy, sample: Sample, processes_per_pod: int = 1) -> Load:
    rate = sum(t.input_rate for t in sample.tasks)
    processed = sum(p.processed_rate for p in sample.pods)
    known = [p for p in sample.pods if p.utilization is not None]
    busy = sum(p.utilization or 0.0 for p in known)
    busy_processed = sum(p.processed_rate for p in known)
    capacity = busy_processed / busy if busy >= MIN_TOTAL_UTILIZATION and busy_processed > EPS else None
    utilization = busy / len(known) if known else None
    excess, over, stalled = 0, [], []
    for t in sample.tasks:
        allowed = allowed_lag(policy, t)
        if allowed is None or t.lag <= allowed:
            continue
        if t.processed_rate <= EPS:
            stalled.append(t.task)
        else:
            excess += math.ceil(t.lag - allowed)
            over.append(t.task)
    basis = "busy"
    if not known and sample.pods:
        # No Pod reports a busy fraction or CPU. Lag over its target on tasks that process says
        # the Pods cannot keep up: take them as fully busy, so a Pod does the processed rate
        # per Pod. No input and no task over its target says they are idle. Otherwise (they
        # keep up) nothing tells how much less would do: no decision.
        if over and processed > EPS:
            utilization, capacity, basis = 1.0, processed / len(sample.pods), "processed"
        elif rate <= EPS and not stalled:
            utilization, basis = 0.0, "processed"
    p99s = [p.latency_p99_seconds for p in sample.pods if p.latency_p99_seconds is not None]
    hot = None
    if capacity is not None and sample.tasks:
        busiest = max(sample.tasks, key=lambda t: t.input_rate)
        if busiest.input_rate > capacity / max(1, processes_per_pod) * policy.target_utilization:
            hot = (busiest.task, busiest.input_rate)
    return Load(
        input_rate=rate,
        processed_rate=processed,
        capacity=capacity,
        utilization=utilization,
        excess_lag=excess,
        over_target=tuple(over),
        stalled=tuple(stalled),
        latency_p99_seconds=max(p99s) if p99s else None,
        hot_task=hot,
        basis=basis,
    )


def _n(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 10 else f"{x:.1f}".rstrip("0").rstrip(".") or "0"


def _pct(x: float) -> str:
    return f"{x * 100:.0f}%"


@dataclass(frozen=True)
class Recommended:
    """This pass's recommendation from the load alone (before windows, policies and bounds)."""

    replicas: int | None  # None: no decision from this sample
    needed: float | None  # fractional replicas the load needs
    text: str


def recommend(policy: AutoscalingPolicy, load: Load, current: int, processes_per_pod: int = 1) -> Recommended:
    """The formula, with the hysteresis of ``tolerance`` around the current count."""
    if load.utilization is None:
        return Recommended(
            None,
            None,
            "the workers report neither a busy fraction nor CPU"
            + (
                ", and keep up with the input (no task over its lag target)"
                if load.processed_rate > EPS
                else ""
            ),
        )
    u = policy.target_utilization
    if load.capacity is None:
        if load.input_rate > EPS and load.processed_rate <= EPS:
            return Recommended(
                current,
                None,
                f"input arrives at {_n(load.input_rate)} records/s but nothing is processed "
                "(tasks restoring or moving): more Pods would not help",
            )
        needed = 0.0
        text = (
            "no input"
            if load.input_rate <= EPS
            else f"the workers are idle ({_pct(load.utilization)} busy at {_n(load.input_rate)} records/s)"
        )
    else:
        c = load.capacity
        steady = load.input_rate / (c * u)
        needed = steady
        text = (
            "busy fraction unknown; tasks over their lag target, so the Pods count as fully busy at "
            f"the processed {_n(load.processed_rate)} records/s: "
            if load.basis == "processed"
            else ""
        ) + (
            f"input {_n(load.input_rate)} records/s, a Pod processes {_n(c)}/s fully busy "
            f"(now {_pct(load.utilization)} busy): {_n(load.input_rate)} / ({_n(c)} x {_pct(u)}) = {steady:.2f}"
        )
        if load.excess_lag > 0:
            drain = (load.input_rate + load.excess_lag / policy.drain_seconds) / c
            text += (
                f"; {load.excess_lag:,} records over the lag target on {len(load.over_target)} "
                f"task(s), drained within {_n(policy.drain_seconds)}s at full busy: {drain:.2f}"
            )
            needed = max(needed, drain)
    # A dead band: the count moves only when it is below ceil(needed) or above
    # ceil(needed x (1 + tolerance)), and then to the band's middle, ceil(needed x (1 +
    # tolerance / 2)): samples within about +-tolerance/4 of each other then all keep it
    # inside their bands. (Landing on ceil(needed) on the way out, after a window's lowest
    # noisy sample, or on the band's top on the way in, after its highest, moved it a second
    # time at a steady rate: tests/unit/operator/core/test_autoscaling_decision.py.)
    fit = math.ceil(needed - EPS)
    top = math.ceil(needed * (1 + policy.tolerance) - EPS)
    land = math.ceil(needed * (1 + policy.tolerance / 2) - EPS)
    if fit > current or top < current:
        replicas = land
        text += f" -> {fit}" + (f", {land} with {_pct(policy.tolerance / 2)} headroom" if land > fit else "")
    else:
        replicas = current
        text += f" -> {fit}" + (
            f"; {current} is within the {_pct(policy.tolerance)} tolerance" if fit < current else ""
        )
    if load.stalled:
        text += f"; {len(load.stalled)} task(s) over the lag target process nothing (restoring or moving): not counted"
    if load.hot_task is not None:
        name, rate = load.hot_task
        text += (
            f"; task {name} alone gets {_n(rate)} records/s, more than one process handles at "
            f"{_pct(u)}: more Pods cannot split it"
        )
    target, p99 = policy.latency_p99_seconds, load.latency_p99_seconds
    if target is not None and p99 is not None and p99 > target:
        if replicas < current:
            replicas = current
            text += f"; no scale-in while the p99 latency {_n(p99)}s is over its target {_n(target)}s"
        elif replicas <= current and load.utilization < u:
            text += (
                f"; the p99 latency {_n(p99)}s is over its target {_n(target)}s with the workers "
                f"{_pct(load.utilization)} busy: more Pods would not lower it (commit interval? sink?)"
            )
    return Recommended(replicas, needed, text)
