"""What the autoscaler remembers between passes (``status.autoscaling``): windows, the running step."""

from __future__ import annotations

from dataclasses import dataclass, field

from baton.control.messages import Color

from .policy import HeldBy, StepPhase


@dataclass(frozen=True)
class Recommendation:
    at: float
    replicas: int


@dataclass(frozen=True)
class ScaleEvent:
    at: float
    from_replicas: int
    to_replicas: int


@dataclass(frozen=True)
class History:
    """What the windows and step policies need to remember (kept in ``status.autoscaling``)."""

    recommendations: tuple[Recommendation, ...] = ()
    since: float | None = None  # recommendations were recorded without a gap since then
    scale_events: tuple[ScaleEvent, ...] = ()


@dataclass(frozen=True)
class Step:
    """A change of the active color's count in progress (``status.autoscaling.step``)."""

    color: Color
    phase: StepPhase
    from_replicas: int
    to_replicas: int
    started_at: float
    phase_since: float
    reason: str = ""


@dataclass(frozen=True)
class AutoscalingState:
    """``status.autoscaling``: the operator's memory between passes."""

    replicas: dict[Color, int]  # what each color's StatefulSet is set to
    history: History = field(default_factory=History)
    step: Step | None = None
    desired: int | None = None
    reason: str = ""
    held_by: HeldBy | None = None
    last_scale_time: float | None = None
