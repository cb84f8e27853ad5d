"""``status.autoscaling`` on the wire: :func:`to_status` and :func:`from_status`."""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from typing import Any

from baton.control.messages import COLORS, Color

from .policy import HeldBy, StepPhase
from .state import AutoscalingState, History, Recommendation, ScaleEvent, Step


def _ts(value: float | None) -> str | None:
    if value is None:
        return None
    return datetime.datetime.fromtimestamp(value, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_ts(value: Any) -> float | None:
    if not value:
        return None
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def _color(value: Any) -> Color | None:
    for c in COLORS:
        if value == c:
            return c
    return None


_STEP_PHASES: tuple[StepPhase, ...] = ("ScalingOut", "WarmingUp", "Draining", "Removing")
_HELD: tuple[HeldBy, ...] = ("flip", "deploy", "step", "unready", "metrics")


def to_status(state: AutoscalingState, active: Color) -> dict[str, Any]:
    """``status.autoscaling``: current, desired, why, and the memory of the windows."""
    h = state.history
    out: dict[str, Any] = {
        "current": state.replicas.get(active),
        "desired": state.desired,
        "reason": state.reason,
        "replicas": dict(state.replicas),
        "recommendations": [{"at": _ts(r.at), "replicas": r.replicas} for r in h.recommendations],
        "scaleEvents": [
            {"at": _ts(e.at), "from": e.from_replicas, "to": e.to_replicas} for e in h.scale_events
        ],
    }
    optional: dict[str, Any] = {
        "heldBy": state.held_by,
        "since": _ts(h.since),
        "lastScaleTime": _ts(state.last_scale_time),
    }
    if state.step is not None:
        s = state.step
        optional["step"] = {
            "color": s.color,
            "phase": s.phase,
            "from": s.from_replicas,
            "to": s.to_replicas,
            "startedAt": _ts(s.started_at),
            "phaseSince": _ts(s.phase_since),
            "reason": s.reason,
        }
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def from_status(raw: Mapping[str, Any] | None) -> AutoscalingState | None:
    if not raw or not raw.get("replicas"):
        return None
    replicas: dict[Color, int] = {}
    for name, value in (raw.get("replicas") or {}).items():
        color = _color(name)
        if color is not None:
            replicas[color] = int(value)
    if not replicas:
        return None
    step = None
    s = raw.get("step")
    color = _color((s or {}).get("color"))
    phase = next((p for p in _STEP_PHASES if s and s.get("phase") == p), None)
    if s and color is not None and phase is not None:
        started = _parse_ts(s.get("startedAt")) or 0.0
        step = Step(
            color,
            phase,
            int(s["from"]),
            int(s["to"]),
            started,
            _parse_ts(s.get("phaseSince")) or started,
            str(s.get("reason") or ""),
        )
    history = History(
        recommendations=tuple(
            Recommendation(_parse_ts(r.get("at")) or 0.0, int(r["replicas"]))
            for r in raw.get("recommendations") or ()
        ),
        since=_parse_ts(raw.get("since")),
        scale_events=tuple(
            ScaleEvent(_parse_ts(e.get("at")) or 0.0, int(e["from"]), int(e["to"]))
            for e in raw.get("scaleEvents") or ()
        ),
    )
    held = next((h for h in _HELD if raw.get("heldBy") == h), None)
    desired = raw.get("desired")
    return AutoscalingState(
        replicas=replicas,
        history=history,
        step=step,
        desired=None if desired is None else int(desired),
        reason=str(raw.get("reason") or ""),
        held_by=held,
        last_scale_time=_parse_ts(raw.get("lastScaleTime")),
    )
