"""``spec.autoscaling`` as the autoscaler reads it: bounds, targets, and how fast to move."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

EPS = 1e-9
# Below this sum of busy fractions over the Pods the workers are idle, and records per busy
# second is noise (1 record in 1 % of a second "is" 100 records/s).
MIN_TOTAL_UTILIZATION = 0.05
FLIP_PHASES = ("Flipping", "RollingBack")
DEPLOY_PHASES = ("Deploying", "Promoting")
STEP_REQUEUE_S = 10.0
IDLE_REQUEUE_S = 30.0

DeployPhase = Literal["Deploying", "Promoting", "Flipping", "RollingBack", "Stable"]
HeldBy = Literal["flip", "deploy", "step", "unready", "metrics"]
StepPhase = Literal["ScalingOut", "WarmingUp", "Draining", "Removing"]


# -- the policy (spec.autoscaling) ----------------------------------------------------------


@dataclass(frozen=True)
class StepPolicy:
    """HPA's HPAScalingPolicy: at most ``value`` Pods (or percent) of change per period."""

    type: Literal["Pods", "Percent"]
    value: int
    period_seconds: float


@dataclass(frozen=True)
class ScalingRules:
    """HPA's HPAScalingRules, one per direction."""

    stabilization_window_seconds: float
    policies: tuple[StepPolicy, ...]
    select_policy: Literal["Max", "Min", "Disabled"] = "Max"


# A scale-out costs a rebalance and warmups, a scale-in moves actives: both are slower to
# undo than a Deployment's, so both windows are longer than the HPA's (0 s up, 300 s down).
DEFAULT_SCALE_UP = ScalingRules(60, (StepPolicy("Percent", 100, 60), StepPolicy("Pods", 4, 60)))
DEFAULT_SCALE_DOWN = ScalingRules(300, (StepPolicy("Percent", 50, 120),))


@dataclass(frozen=True)
class AutoscalingPolicy:
    """``spec.autoscaling``: bounds, targets, and how fast to move."""

    min_replicas: int
    max_replicas: int
    target_utilization: float = 0.7  # of each Pod's processing time (busy fraction, or CPU)
    lag_records: int | None = None  # per task
    lag_seconds: float | None = None  # per task, in seconds of its input
    latency_p99_seconds: float | None = None  # end to end, worst Pod
    drain_seconds: float = 120.0  # lag over its target should be drained within this
    tolerance: float = 0.2  # dead band over the needed count (noise within +-tolerance/4 never moves it)
    scale_up: ScalingRules = DEFAULT_SCALE_UP
    scale_down: ScalingRules = DEFAULT_SCALE_DOWN
    step_timeout_seconds: float = 900.0  # a step that has not progressed by then ends (Warning)
    metrics_max_age_seconds: float = 120.0  # an older sample is no sample

    def problems(self, standby_replicas: int = 0) -> list[str]:
        """What a person must fix, in words (the CRD's CEL rules say the same)."""
        out = []
        if self.min_replicas < 1:
            out.append("spec.autoscaling.minReplicas must be at least 1")
        if self.max_replicas < self.min_replicas:
            out.append("spec.autoscaling.maxReplicas must be at least minReplicas")
        if standby_replicas and self.max_replicas < standby_replicas + 1:
            out.append(
                f"spec.autoscaling.maxReplicas must be at least standbyReplicas + 1 ({standby_replicas + 1}): "
                "a task's standbys run on other instances than its active"
            )
        if not 0 < self.target_utilization <= 1:
            out.append("spec.autoscaling.targetUtilization must be above 0 and at most 1")
        for name, value in (
            ("lagRecords", self.lag_records),
            ("lagSeconds", self.lag_seconds),
            ("latencyP99Seconds", self.latency_p99_seconds),
        ):
            if value is not None and value <= 0:
                out.append(f"spec.autoscaling.{name} must be above 0")
        if self.drain_seconds <= 0:
            out.append("spec.autoscaling.drainSeconds must be above 0")
        if not 0 <= self.tolerance < 1:
            out.append("spec.autoscaling.tolerance must be at least 0 and below 1")
        for direction, rules in (("scaleUp", self.scale_up), ("scaleDown", self.scale_down)):
            if rules.stabilization_window_seconds < 0:
                out.append(
                    f"spec.autoscaling.behavior.{direction}.stabilizationWindowSeconds must be at least 0"
                )
            if rules.select_policy != "Disabled" and not rules.policies:
                out.append(f"spec.autoscaling.behavior.{direction} needs a policy (or selectPolicy Disabled)")
            for p in rules.policies:
                if p.value <= 0 or p.period_seconds <= 0:
                    out.append(
                        f"spec.autoscaling.behavior.{direction}.policies need a value and a period above 0"
                    )
        return out

    @classmethod
    def from_spec(cls, raw: Mapping[str, Any]) -> AutoscalingPolicy:
        """From ``spec.autoscaling`` as the API server gives it (camelCase, defaults applied or not)."""
        behavior = raw.get("behavior") or {}

        def rules(key: str, default: ScalingRules) -> ScalingRules:
            r = behavior.get(key)
            if not r:
                return default
            policies = r.get("policies")
            return ScalingRules(
                float(r.get("stabilizationWindowSeconds", default.stabilization_window_seconds)),
                default.policies
                if policies is None
                else tuple(
                    StepPolicy(p["type"], int(p["value"]), float(p["periodSeconds"])) for p in policies
                ),
                r.get("selectPolicy", default.select_policy),
            )

        def opt(key: str) -> float | None:
            value = raw.get(key)
            return None if value is None else float(value)

        lag_records = raw.get("lagRecords")
        return cls(
            min_replicas=int(raw.get("minReplicas", 1)),
            max_replicas=int(raw["maxReplicas"]),
            target_utilization=float(raw.get("targetUtilization", 0.7)),
            lag_records=None if lag_records is None else int(lag_records),
            lag_seconds=opt("lagSeconds"),
            latency_p99_seconds=opt("latencyP99Seconds"),
            drain_seconds=float(raw.get("drainSeconds", 120.0)),
            tolerance=float(raw.get("tolerance", 0.2)),
            scale_up=rules("scaleUp", DEFAULT_SCALE_UP),
            scale_down=rules("scaleDown", DEFAULT_SCALE_DOWN),
            step_timeout_seconds=float(raw.get("stepTimeoutSeconds", 900.0)),
        )
