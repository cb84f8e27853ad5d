"""StreamApp status from what the cluster reports: a pure function, kstatus conventions.

kstatus (and so `kubectl wait`, Argo CD, Flux) reads ``observedGeneration`` and the
conditions ``Ready``, ``Reconciling`` and ``Stalled``. Ready means the app serves the current
generation: the active color runs it with every Pod ready and no deploy or flip is under way.
The idle color's health is its own condition, ``StandbyReady``, so the standby upgrade after
each flip does not turn the app not-Ready; Pods that cannot start without a person
(CrashLoopBackOff, an image that cannot be pulled) in either color make the app Stalled with
the Pod and the reason in the message, so Argo CD shows Degraded instead of Progressing forever.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from baton.control.messages import Color
from baton.operator.core.builders.common import selector_string
from baton.operator.core.constants import ANNOTATION_SPEC_HASH
from baton.operator.core.deploy import Plan
from baton.operator.core.spec import StreamApp


@dataclass(frozen=True)
class Observed:
    """What the reconciler saw: the colors' StatefulSets and any reason it could not apply."""

    statefulsets: dict[Color, dict[str, Any] | None]
    active_color: Color = "blue"
    lag: dict[Color, int] = field(default_factory=dict)
    standbys: dict[Color, dict[str, int]] = field(default_factory=dict)  # see baton.operator.coverage
    error: str | None = None  # a spec the cluster refused, or a failure the operator cannot fix
    topics: dict[str, str] = field(default_factory=dict)
    failing: dict[Color, str] = field(default_factory=dict)  # see pods_failing


# Container states that do not clear without a change by a person (a new image, a fixed
# config, a Secret created): waiting longer only adds restarts.
FAILING_REASONS = frozenset(
    {
        "CrashLoopBackOff",
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "CreateContainerConfigError",
        "CreateContainerError",
        "RunContainerError",
    }
)


def pods_failing(pods: list[dict[str, Any]], limit: int = 2) -> str | None:
    """Why a color's Pods will not become ready by themselves, or None.

    Names the Pod, the container, the waiting reason, the restarts and the last exit (code
    and termination message: the worker writes its fatal error there), at most ``limit``
    Pods, so `kubectl get sapp` and Argo CD say what to fix.
    """
    found = []
    for pod in sorted(pods, key=lambda p: str((p.get("metadata") or {}).get("name", ""))):
        status = pod.get("status") or {}
        statuses = [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]
        for cs in statuses:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            reason = waiting.get("reason")
            if reason not in FAILING_REASONS:
                continue
            last = (cs.get("lastState") or {}).get("terminated") or {}
            if last:
                why = f"exit code {last.get('exitCode')}"
                detail = str(last.get("message") or last.get("reason") or "").strip()
                why += f": {detail[:300]}" if detail else ""
            else:
                why = str(waiting.get("message") or "").strip()[:300]
            name = (pod.get("metadata") or {}).get("name", "?")
            restarts = int(cs.get("restartCount") or 0)
            found.append(
                f"Pod {name} container {cs.get('name')} {reason} (restarts {restarts})"
                + (f", {why}" if why else "")
            )
            break
    if not found:
        return None
    more = f" (and {len(found) - limit} more Pods)" if len(found) > limit else ""
    return "; ".join(found[:limit]) + more


@dataclass(frozen=True)
class ColorReadiness:
    ready: bool
    message: str


def color_readiness(sts: dict[str, Any] | None, want_replicas: int, want_hash: str) -> ColorReadiness:
    """Whether one color's StatefulSet is rolled out, in the way `kubectl rollout status` means it."""
    if sts is None:
        return ColorReadiness(False, "StatefulSet not created yet")
    meta = sts.get("metadata") or {}
    status = sts.get("status") or {}
    if (meta.get("annotations") or {}).get(ANNOTATION_SPEC_HASH) != want_hash:
        return ColorReadiness(False, "StatefulSet not updated to the current spec yet")
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        return ColorReadiness(False, "StatefulSet controller has not observed the latest change")
    ready = int(status.get("readyReplicas") or 0)
    updated = int(status.get("updatedReplicas") or 0)
    replicas = int(status.get("replicas") or 0)
    if replicas != want_replicas:
        return ColorReadiness(False, f"{replicas}/{want_replicas} Pods exist")
    # OnDelete (Rolling) never moves currentRevision: updatedReplicas alone says it is rolled out.
    on_delete = ((sts.get("spec") or {}).get("updateStrategy") or {}).get("type") == "OnDelete"
    if want_replicas and not on_delete and status.get("currentRevision") != status.get("updateRevision"):
        return ColorReadiness(False, f"{updated}/{want_replicas} Pods updated")
    if updated < want_replicas and want_replicas:
        return ColorReadiness(False, f"{updated}/{want_replicas} Pods updated")
    if ready < want_replicas:
        return ColorReadiness(False, f"{ready}/{want_replicas} Pods ready")
    return ColorReadiness(True, f"{ready}/{want_replicas} Pods ready")


def _condition(  # noqa: PLR0917 (a private helper called with one line per condition)
    kind: str,
    ok: bool,
    reason: str,
    message: str,
    generation: int,
    previous: dict[str, dict[str, Any]],
    now: str,
) -> dict[str, Any]:
    status = "True" if ok else "False"
    old = previous.get(kind)
    changed = old is None or old.get("status") != status
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": now if changed or old is None else old.get("lastTransitionTime", now),
    }


def _color_status(
    app: StreamApp,
    color: Color,
    sts: dict[str, Any] | None,
    lag: int | None,
    *,
    generation: int = 0,
    standbys: dict[str, int] | None = None,
) -> dict[str, Any]:
    status = (sts or {}).get("status") or {}
    out: dict[str, Any] = {
        "applicationId": app.color_application_id(color, generation),
        "replicas": int(status.get("replicas") or 0),
        "readyReplicas": int(status.get("readyReplicas") or 0),
        "updatedReplicas": int(status.get("updatedReplicas") or 0),
        "revision": status.get("currentRevision") or "",
        "updateRevision": status.get("updateRevision") or "",
        "specHash": ((sts or {}).get("metadata") or {}).get("annotations", {}).get(ANNOTATION_SPEC_HASH, ""),
    }
    if lag is not None:
        out["lag"] = lag
    if standbys is not None:
        out["standbys"] = dict(standbys)
    return out


def _standby_condition(
    app: StreamApp,
    active: Color,
    readiness: Mapping[Color, ColorReadiness],
    failing: Mapping[Color, str],
    when: tuple[int, dict[str, dict[str, Any]], str],
) -> dict[str, Any]:
    """``StandbyReady``: the idle color runs its revision with every Pod ready (a warm rollback
    target and the next deploy's starting point). Always True for one color (Rolling)."""
    idle = [c for c in app.colors if c != active]
    if not idle:
        message = "upgrade.strategy Rolling runs one color: there is no standby color"
        return _condition("StandbyReady", True, "NoStandbyColor", message, *when)
    color = idle[0]
    if color in failing:
        return _condition("StandbyReady", False, "PodsFailing", f"{color}: {failing[color]}", *when)
    state = readiness[color]
    reason = "StandbyReady" if state.ready else "NotReady"
    return _condition("StandbyReady", state.ready, reason, f"{color}: {state.message}", *when)


def compute_status(  # noqa: PLR0917 (one input per part of the status)
    app: StreamApp,
    observed: Observed,
    want_hash: str | Mapping[Color, str],
    previous_conditions: list[dict[str, Any]] | None = None,
    now: datetime.datetime | None = None,
    plan: Plan | None = None,
    generations: Mapping[Color, int] | None = None,
    replicas: Mapping[Color, int] | None = None,
) -> dict[str, Any]:
    """The whole ``status`` of a StreamApp (written with server-side apply).

    ``replicas``: each color's StatefulSet replicas when they are not spec.replicas (spec.autoscaling).
    ``want_hash`` is the spec revision every color should run, or one per color during a
    blue-green deploy; ``plan`` (the deploy machine's) decides phase, message, Stalled and the
    active color: Ready is True only when the machine is Stable and every color is rolled out.
    """
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    prev = {c["type"]: c for c in previous_conditions or [] if "type" in c}
    gen = app.generation
    wants = {c: want_hash if isinstance(want_hash, str) else want_hash.get(c, "") for c in app.colors}
    readiness = {
        c: color_readiness(observed.statefulsets.get(c), (replicas or {}).get(c, app.spec.replicas), wants[c])
        for c in app.colors
    }
    active = plan.active if plan is not None else observed.active_color
    active = active if active in app.colors else app.colors[0]
    serving = readiness[active].ready
    detail = "; ".join(f"{c}: {r.message}" for c, r in readiness.items())
    any_sts = any(observed.statefulsets.get(c) is not None for c in app.colors)
    failing = {c: observed.failing[c] for c in app.colors if observed.failing.get(c)}
    failing_text = "; ".join(f"{c}{'' if c == active else ' (standby)'}: {why}" for c, why in failing.items())

    if observed.error is not None:
        phase, message = "Stalled", observed.error
        ready = _condition("Ready", False, "Stalled", message, gen, prev, stamp)
        reconciling = _condition("Reconciling", False, "Stalled", message, gen, prev, stamp)
        stalled = _condition("Stalled", True, "ApplyFailed", message, gen, prev, stamp)
    elif app.spec.paused:
        phase, message = "Paused", f"reconciliation paused (spec.paused); {detail}"
        ready = _condition("Ready", serving, "Paused", message, gen, prev, stamp)
        reconciling = _condition("Reconciling", False, "Paused", message, gen, prev, stamp)
        stalled = _condition("Stalled", False, "Paused", message, gen, prev, stamp)
    elif plan is not None and plan.stalled_reason:
        phase, message = plan.phase, plan.message
        ready = _condition("Ready", False, plan.stalled_reason, message, gen, prev, stamp)
        reconciling = _condition("Reconciling", False, plan.stalled_reason, message, gen, prev, stamp)
        stalled = _condition("Stalled", True, plan.stalled_reason, message, gen, prev, stamp)
    else:
        settled = serving and (plan is None or plan.phase == "Stable")
        if plan is not None:
            phase, message = plan.phase, plan.message
        elif serving:
            phase, message = "Stable", detail
        else:
            phase, message = "Deploying", detail
        if phase in ("Deploying", "Stable") and not any_sts:
            phase = "Pending"
        if failing:
            message = f"Pods failing: {failing_text}"
            why = "ActiveColorReady" if settled else "PodsFailing"
            ready = _condition("Ready", settled, why, message, gen, prev, stamp)
            reconciling = _condition("Reconciling", False, "PodsFailing", message, gen, prev, stamp)
            stalled = _condition("Stalled", True, "PodsFailing", message, gen, prev, stamp)
        elif settled:
            ready = _condition("Ready", True, "ActiveColorReady", message, gen, prev, stamp)
            reconciling = _condition("Reconciling", False, "Reconciled", message, gen, prev, stamp)
            stalled = _condition("Stalled", False, "Reconciled", message, gen, prev, stamp)
        else:
            ready = _condition("Ready", False, phase, message, gen, prev, stamp)
            reconciling = _condition("Reconciling", True, phase, message, gen, prev, stamp)
            stalled = _condition("Stalled", False, "Progressing", message, gen, prev, stamp)
    standby = _standby_condition(app, active, readiness, failing, (gen, prev, stamp))

    gens = generations or {}
    colors = {
        c: _color_status(
            app,
            c,
            observed.statefulsets.get(c),
            observed.lag.get(c),
            generation=gens.get(c, 0),
            standbys=observed.standbys.get(c),
        )
        for c in app.colors
    }
    status: dict[str, Any] = {
        "observedGeneration": gen,
        "phase": phase,
        "activeColor": active,
        "applicationId": app.application_id,
        "replicas": colors[active]["replicas"],
        "readyReplicas": colors[active]["readyReplicas"],
        "selector": selector_string(app, active),
        "message": message,
        "colors": colors,
        "conditions": [ready, reconciling, stalled, standby],
    }
    if active in observed.lag:
        status["lag"] = observed.lag[active]
    if active in observed.standbys:
        status["standbys"] = dict(observed.standbys[active])
    if observed.topics:
        status["topics"] = dict(observed.topics)
    return status


# status fields other writers own (the compactor Job's summary): never re-applied by the operator
_NOT_OURS = ("compaction",)


def spec_problems(exc: ValidationError) -> list[str]:
    """Each field the operator's spec model refused, with why: ``spec.x.y: Extra inputs are not permitted``."""
    out = []
    for error in exc.errors():
        where = ".".join(str(p) for p in ("spec", *error["loc"]))  # errors of StreamAppSpec
        out.append(f"{where}: {error['msg']}")
    return out


def not_understood_status(
    body: Mapping[str, Any], problems: list[str], version: str, now: datetime.datetime | None = None
) -> dict[str, Any]:
    """The status of an app whose spec this operator cannot parse: typically a newer CRD's field.

    Everything the operator wrote before stays (the deploy record and the active color are
    what a newer operator resumes from); only phase, observedGeneration and the conditions
    say what is wrong. Nothing is applied or deleted meanwhile, and the pass does not raise,
    so kopf does not retry it with backoff forever.
    """
    stamp = (now or datetime.datetime.now(datetime.UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
    previous = dict(body.get("status") or {})
    prev = {c["type"]: c for c in previous.get("conditions") or [] if "type" in c}
    gen = int((body.get("metadata") or {}).get("generation") or 0)
    message = (
        f"this operator (Baton {version}) does not understand the spec: {'; '.join(problems)}. "
        "The CRD is newer than the operator: upgrade the operator (nothing is changed until then)"
    )
    conditions = [
        _condition("Ready", False, "SpecNotUnderstood", message, gen, prev, stamp),
        _condition("Reconciling", False, "SpecNotUnderstood", message, gen, prev, stamp),
        _condition("Stalled", True, "SpecNotUnderstood", message, gen, prev, stamp),
    ]
    kept = {k: v for k, v in previous.items() if k not in (*_NOT_OURS, "conditions")}
    known = {"Ready", "Reconciling", "Stalled"}
    others = [c for c in previous.get("conditions") or [] if c.get("type") not in known]
    return kept | {
        "phase": "Stalled",
        "message": message,
        "observedGeneration": gen,
        "conditions": conditions + others,
    }
