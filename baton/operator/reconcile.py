"""One reconciliation of one StreamApp: read it fresh, apply the desired objects, write status.

Idempotent by construction (server-side apply of pure builders' output), so a crash at any
point is repaired by the next run; the handlers call it on every change, on resume and on a
timer. Reconciliations of the same app are serialised by a lock, and each one re-reads the
StreamApp first, so a stale body can never roll the app back to an older spec.

Why one module of this size: a pass is one ordered sequence (read, build, apply, prune,
plan, flip, status) over one app's state; its steps are small functions here, and the
pure parts they call live in ``core/`` (``builders/``, ``deploy.py``, ``status.py``).
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from baton import __version__
from baton.control.messages import Color, other
from baton.operator import coverage, flips, pod_metrics, topics
from baton.operator.claims import expansion, undersized
from baton.operator.core import autoscaling, deploy, drift, rolling
from baton.operator.core.builders import desired_objects, kafka_access
from baton.operator.core.builders.common import color_name, selector_string
from baton.operator.core.builders.desired import ColorRun, color_runs
from baton.operator.core.builders.rack import DEFAULT_NODE_READER_ROLE, binding_selector
from baton.operator.core.builders.statefulset import spec_hash
from baton.operator.core.compaction.cronjob import DEFAULT_COMPACTOR_ROLE, spark_account
from baton.operator.core.compaction.cronjob import DEFAULT_IMAGE as DEFAULT_COMPACTOR_IMAGE
from baton.operator.core.constants import API_VERSION, KIND, LABEL_APP
from baton.operator.core.deploy import (
    ANNOTATION_PROMOTE,
    ANNOTATION_ROLLBACK,
    ColorView,
    Inputs,
    Plan,
)
from baton.operator.core.deploy_record import Assignment, DeployRecord, from_status, spec_json, to_status
from baton.operator.core.spec import StreamApp
from baton.operator.core.status import (
    Observed,
    color_readiness,
    compute_status,
    not_understood_status,
    pods_failing,
    spec_problems,
)
from baton.operator.kube import CLUSTER_KINDS, Kube, RefusedError
from baton.operator.metrics import METRICS
from baton.operator.state import FlipResult, OperatorState

log = logging.getLogger(__name__)

# (body, type "Normal"/"Warning", reason, message): posts a Kubernetes Event (kopf in the operator).
EventSink = Callable[[dict[str, Any], str, str, str], None]


@dataclass
class Outcome:
    """What one reconciliation did, for logs and tests."""

    applied: list[str] = field(default_factory=list)  # "Kind/name" whose resourceVersion changed
    pruned: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    requeue_after: float = 30.0  # when the deploy machine wants to look again
    autoscaling_requeue: float | None = None  # when the autoscaler wants to (spec.autoscaling)
    replicas: dict[Color, int] = field(default_factory=dict)  # each color's StatefulSet replicas


def _ref(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _observe(kube: Kube, app: StreamApp) -> dict[Color, dict[str, Any] | None]:
    return {c: kube.get("apps/v1", "StatefulSet", f"{app.name}-{c}", app.namespace) for c in app.colors}


def _kafka_admin(state: OperatorState, app: StreamApp) -> tuple[Any, dict[str, Any], str | None]:
    """An AdminClient for the app's cluster and its config, or (None, {}, why not)."""
    secrets = {}
    for name in kafka_access.secrets_read(app.spec.kafka):
        data = state.kube.secret_data(name, app.namespace)
        if data is not None:
            secrets[name] = data
    try:
        settings = kafka_access.operator_settings(app.spec.kafka, secrets, secret_files(app))
    except kafka_access.MissingSecret as exc:
        return None, {}, f"{exc}; the workers create the internal topics themselves"
    config = topics.admin_config(app, settings)
    key, fingerprint = f"{app.namespace}/{app.name}", repr(sorted(config.items()))
    return state.admin(key, fingerprint, lambda: topics.new_admin(config)), config, None


def secret_files(app: StreamApp) -> Callable[[str, str], str]:
    """Where the operator keeps an app's certificates and keys for its own clients: a folder
    only its user reads, under the temporary directory (the chart mounts an emptyDir there)."""
    folder = Path(tempfile.gettempdir()) / f"baton-operator-{os.getuid()}" / app.namespace / app.name

    def write(name: str, content: str) -> str:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / name
        if not path.exists() or path.read_text() != content:
            tmp = path.with_suffix(".new")
            tmp.touch(mode=0o600)
            tmp.write_text(content)
            tmp.replace(path)
        return str(path)

    return write


@dataclass(frozen=True)
class KafkaView:
    """What Kafka said in one pass: topic status, lag per application id, the control state."""

    topics: dict[str, str] = field(default_factory=dict)
    lag: dict[str, int] = field(default_factory=dict)  # application id (with generation) -> lag
    standbys: dict[str, dict[str, int]] = field(default_factory=dict)  # application id -> status.standbys
    control: flips.ControlState | None = None
    extra: dict[str, str] = field(default_factory=dict)  # client security settings for flips
    # spec.autoscaling: (committed, end) per partition, per application id, read at
    offsets: dict[str, dict[tuple[str, int], tuple[int, int]]] = field(default_factory=dict)
    read_at: float = 0.0
    # ... and the members' roles from the last assignment (members, warmups, actives per Pod)
    roles: dict[str, coverage.GroupRoles] = field(default_factory=dict)


def _application_ids(app: StreamApp, status: dict[str, Any]) -> list[str]:
    """Every application id a color runs or is about to run (lag is read for each)."""
    record = from_status(status.get("deploy"))
    ids = {app.color_application_id(c) for c in app.colors}
    if record is not None:
        ids |= {app.color_application_id(c, a.generation) for c, a in record.colors.items()}
        top = max(a.generation for a in record.colors.values())
        # a Rebuild starting in this very pass gets generation top+1
        ids |= {app.color_application_id(c, top + 1) for c in app.colors}
    return sorted(ids)


def _observe_kafka(
    state: OperatorState, app: StreamApp, body: dict[str, Any], events: EventSink
) -> KafkaView:
    """Ensure the control topic, read lag and who is active; never raises for Kafka trouble."""
    admin, config, why_not = _kafka_admin(state, app)
    if admin is None:
        return KafkaView(topics={"message": why_not or ""})
    result: dict[str, str] = {}
    lag: dict[str, int] = {}
    offsets: dict[str, dict[tuple[str, int], tuple[int, int]]] = {}
    read_at = time.time()
    standbys: dict[str, dict[str, int]] = {}
    roles: dict[str, coverage.GroupRoles] = {}
    control = None
    extra = flips.client_extra(config)
    try:
        if app.spec.upgrade.strategy == "BlueGreen":
            known = ((body.get("status") or {}).get("topics") or {}).get("control")
            if known != app.control_topic and topics.ensure_control_topic(
                admin, app.control_topic, app.spec.kafka.replication_factor
            ):
                events(body, "Normal", "TopicCreated", f"created control topic {app.control_topic}")
            result["control"] = app.control_topic
        app_ids = _application_ids(app, body.get("status") or {})
        read_at = time.time()
        for app_id in app_ids:
            found = topics.partition_offsets(admin, app_id)
            value = topics.lag_of(found)
            if value is not None and found is not None:
                lag[app_id], offsets[app_id] = value, found
        standbys, roles = _coverage(config, app_ids)
        if app.spec.upgrade.strategy == "BlueGreen":
            key = f"{app.namespace}/{app.name}"
            control = state.control_state(key, app.spec.kafka.bootstrap_servers, app.control_topic, extra)
    except topics.KafkaUnavailableError as exc:
        result["message"] = f"Kafka: {exc}"
    except Exception as exc:
        result["message"] = f"Kafka: {exc}"
    return KafkaView(result, lag, standbys, control, extra, offsets, read_at, roles)


def _coverage(
    config: dict[str, Any], app_ids: list[str]
) -> tuple[dict[str, dict[str, int]], dict[str, coverage.GroupRoles]]:
    """The groups' standby coverage for the status and their members' roles for the
    autoscaler, from one DescribeGroups; what cannot be read is left out (never raises)."""
    try:
        described = coverage.describe(config, app_ids)
    except Exception as exc:  # kafka-python's errors, a broker going away: the status just omits it
        log.info("standby coverage not read", extra={"groups": app_ids, "error": str(exc)})
        return {}, {}
    standbys, roles = {}, {}
    for app_id, description in described.items():
        found = coverage.coverage_from(description)
        if found is not None:
            standbys[app_id] = coverage.as_status(found)
        members_roles = coverage.roles_from(description)
        if members_roles is not None:
            roles[app_id] = members_roles
    return standbys, roles


def _flag(body: dict[str, Any], key: str) -> bool:
    value = ((body.get("metadata") or {}).get("annotations") or {}).get(key)
    return value is not None and str(value).lower() not in ("", "false", "0", "no")


def reconcile(
    state: OperatorState, namespace: str, name: str, events: EventSink, kafka: bool = True
) -> Outcome | None:
    """Bring one StreamApp's objects and status in line with its spec. None if it is gone.

    With ``kafka`` (the operator's periodic pass, unless the operator runs without Kafka)
    it also reads lag and the control topic and carries out the deploy machine's flips;
    without (spec and StatefulSet changes) it only applies objects and status, quickly.
    """
    kube, key = state.kube, f"{namespace}/{name}"
    kafka = kafka and state.kafka
    view: KafkaView | None = None
    if kafka:
        body = kube.get(API_VERSION, KIND, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        parsed = _parse(kube, body, events)
        if parsed is None:
            return None
        app = parsed
        if not app.spec.paused:
            view = _observe_kafka(state, app, body, events)  # slow: outside the lock
    with METRICS.reconciling(namespace):
        with state.lock(key):
            done = _pass(state, namespace, name, events, view, apply=True)
        if done is None:
            return None
        outcome, plan, app = done
        if kafka and view is not None and plan is not None and plan.flip is not None:
            _flip(state, app, plan.flip, view)
            with state.lock(key):
                done = _pass(state, namespace, name, events, None, apply=True, flip=state.take_flip(key))
            if done is not None:
                outcome, plan, app = done
        if plan is not None and plan.roll and not app.spec.paused:
            _roll(kube, app, events, outcome.replicas.get("blue", app.spec.replicas))
    if plan is not None:
        outcome.requeue_after = plan.requeue_after
        if outcome.autoscaling_requeue is not None:
            outcome.requeue_after = min(outcome.requeue_after, outcome.autoscaling_requeue)
    return outcome


def _flip(state: OperatorState, app: StreamApp, to: Color, view: KafkaView) -> None:
    """Run the flip the plan asks for (blocking this worker thread, never kopf's loop)."""
    key = f"{app.namespace}/{app.name}"
    if not state.start_flip(key):
        return
    result = None
    try:
        outcome, last, seconds = flips.flip(
            app.spec.kafka.bootstrap_servers, app.application_id, to, view.extra
        )
        result = (outcome, last, seconds)
    finally:
        state.end_flip(key, result)
    METRICS.flip_finished(
        app.namespace,
        app.name,
        "committed" if outcome.committed else "aborted" if outcome.epoch else "failed",
        seconds,
    )


def _roll(kube: Kube, app: StreamApp, events: EventSink, replicas: int) -> None:
    """Rolling: delete the next outdated Pod once every Pod is Ready (see baton.operator.core.rolling)."""
    sts = kube.get("apps/v1", "StatefulSet", f"{app.name}-blue", app.namespace)
    if sts is None:
        return
    status = sts.get("status") or {}
    if int(status.get("observedGeneration") or 0) < int(sts["metadata"].get("generation") or 0):
        return
    pods = kube.pods(app.namespace, selector_string(app, "blue"), fresh=True)
    victim = rolling.next_pod_to_restart(pods, str(status.get("updateRevision") or ""), replicas)
    if victim is None:
        return
    pod = next(p for p in pods if p["metadata"]["name"] == victim)
    kube.delete({"apiVersion": "v1", "kind": "Pod", "metadata": pod["metadata"]})
    body = kube.get(API_VERSION, KIND, app.name, app.namespace)
    if body is not None:
        events(body, "Normal", "PodRestarted", f"restarted Pod {victim} to run the new revision")


def _pass(  # noqa: PLR0917 (one pass: every input of the machine)
    state: OperatorState,
    namespace: str,
    name: str,
    events: EventSink,
    view: KafkaView | None,
    apply: bool,
    flip: FlipResult | None = None,
) -> tuple[Outcome, Plan | None, StreamApp] | None:
    """One locked pass: read the app (cached, never older than our own writes), run the
    deploy machine, apply what differs, write status."""
    kube = state.kube
    body = kube.get(API_VERSION, KIND, name, namespace)
    if body is None or body["metadata"].get("deletionTimestamp"):
        return None
    parsed = _parse(kube, body, events)
    if parsed is None:
        return None
    app = parsed
    outcome = Outcome()
    previous = body.get("status") or {}
    record = from_status(previous.get("deploy"))
    sts = _observe(kube, app)
    # spec.autoscaling: the replicas the autoscaler set last (status.autoscaling), until this pass's
    scaled_before = autoscaling.from_status(previous.get("autoscaling")) if app.spec.autoscaling else None
    replicas_before = scaled_before.replicas if scaled_before is not None else None
    runs = _with_replicas(color_runs(app, record), replicas_before)
    lag = _lag(app, record, view, previous)
    plan = None
    scaled: autoscaling.Pass | None = None
    if app.spec.paused:
        runs_now = runs
    else:
        revision = spec_hash(app.spec)
        inputs = Inputs(
            colors=app.colors,
            upgrade=app.spec.upgrade,
            revision=revision,
            spec=spec_json(app.spec.model_dump(mode="json", by_alias=True)),
            record=record,
            active=previous.get("activeColor") or app.colors[0],
            views=_views(app, sts, record, runs, lag),
            now=time.time(),
            control_active=view.control.active if view is not None and view.control is not None else None,
            control_epoch=view.control.epoch if view is not None and view.control is not None else None,
            draining=view.control.draining if view is not None and view.control is not None else (),
            promote=_flag(body, ANNOTATION_PROMOTE),
            rollback=_flag(body, ANNOTATION_ROLLBACK),
            flip_running=state.flip_running(f"{namespace}/{name}"),
            flip=flip[0] if flip is not None else None,
            **_scale_holds(app, scaled_before, sts, previous.get("activeColor") or app.colors[0]),
        )
        plan = deploy.plan(inputs)
        if app.spec.autoscaling is not None and view is not None:
            scaled = _autoscale(state, app, plan, sts, view, scaled_before, runs)
            _mark_drains(state, app, view, scaled)
        runs_now = _with_replicas(
            color_runs(app, plan.record), scaled.replicas if scaled is not None else replicas_before
        )
        if apply or runs_now != runs:
            outcome.error = _apply_all(
                kube,
                app,
                body,
                events,
                outcome,
                runs_now,
                plan.flip_in_progress,
                state.compactor_image,
                state.node_reader_role,
                state.compactor_role,
            )
        if outcome.error is not None:  # nothing applied: the machine's step did not happen
            plan, runs_now, scaled = None, runs, None
        else:
            if plan.clear_annotations:
                kube.remove_annotations(API_VERSION, KIND, name, namespace, list(plan.clear_annotations))
            for ev in plan.events:
                events(body, ev.type, ev.reason, ev.message)
            for sev in scaled.events if scaled is not None else ():
                events(body, sev.type, sev.reason, sev.message)
            if plan.outcome is not None:
                METRICS.deploy_finished(namespace, name, plan.outcome[0], plan.outcome[1])
        if plan is not None and runs_now != runs:
            sts = _observe(kube, app)
            lag = _lag(app, plan.record, view, previous)
    observed = Observed(
        statefulsets=sts,
        active_color=plan.active if plan is not None else previous.get("activeColor") or app.colors[0],
        error=outcome.error,
        lag={c: v for c, v in lag.items() if v is not None},
        standbys=_standbys(app, plan.record if plan is not None else record, view, previous),
        topics=view.topics if view is not None else {},
        failing=_failing(kube, app, sts, runs_now),
    )
    extra: dict[str, Any] = {}
    if plan is not None:
        extra["deploy"] = to_status(plan.record)
    if flip is not None:
        extra["lastFlip"] = flip[1]
    extra.update(_autoscaling_status(state, app, scaled, previous, observed.active_color, outcome))
    outcome.replicas = {c: r.app.spec.replicas for c, r in runs_now.items()}
    outcome.status = write_status(kube, app, body, observed, events, plan=plan, runs=runs_now, extra=extra)
    METRICS.observe_status(namespace, name, outcome.status)
    return outcome, plan, app


def _autoscaling_status(  # noqa: PLR0917
    state: OperatorState,
    app: StreamApp,
    scaled: autoscaling.Pass | None,
    previous: dict[str, Any],
    active: Color,
    outcome: Outcome,
) -> dict[str, Any]:
    """``status.autoscaling`` of this pass (and when to look again); a pass without Kafka or
    without a plan keeps what the last one decided."""
    if scaled is not None:
        outcome.autoscaling_requeue = min(scaled.requeue_after, state.autoscaling_interval)
        return {"autoscaling": autoscaling.to_status(scaled.state, active)}
    if app.spec.autoscaling is not None and "autoscaling" in previous:
        return {"autoscaling": previous["autoscaling"]}
    return {}


def _with_replicas(
    runs: dict[Color, ColorRun], replicas: Mapping[Color, int] | None
) -> dict[Color, ColorRun]:
    """Each color's run with the autoscaler's replicas (None: spec.replicas, as without it)."""
    if replicas is None:
        return runs
    out = {}
    for color, run in runs.items():
        n = replicas.get(color)
        if n is None or n == run.app.spec.replicas:
            out[color] = run
        else:
            spec = run.app.spec.model_copy(update={"replicas": n})
            out[color] = ColorRun(run.app.model_copy(update={"spec": spec}), run.generation)
    return out


def _autoscale(  # noqa: PLR0917 (one pass of the autoscaler: what the deploy pass saw)
    state: OperatorState,
    app: StreamApp,
    plan: Plan,
    sts: dict[Color, dict[str, Any] | None],
    view: KafkaView,
    before: autoscaling.AutoscalingState | None,
    runs: dict[Color, ColorRun],
) -> autoscaling.Pass:
    """One pass of spec.autoscaling after the deploy plan (see baton.operator.core.autoscaling).

    The sample comes from this pass's offsets of the active color's group and the previous
    pass's (kept in the operator's memory): input rate from the end offsets, processed rate
    from the committed ones, lag per partition. When every Ready Pod of the active color
    answered this pass's scrape of its /metrics and the last one, the Pods' own busy fraction,
    processed rate and p99 replace the offsets' even split (``_pod_samples``); else the
    decision works from the processed rate alone. Without commits, or without an earlier
    reading, there is no sample and the decision holds (``heldBy: metrics``)."""
    assert app.spec.autoscaling is not None
    policy = autoscaling.AutoscalingPolicy.from_spec(
        app.spec.autoscaling.model_dump(mode="json", by_alias=True, exclude_none=True)
    )
    active = plan.active
    assignment = plan.record.colors.get(active)
    app_id = app.color_application_id(active, assignment.generation if assignment is not None else 0)
    fresh = "message" not in view.topics
    offsets = view.offsets.get(app_id) if fresh else None
    reading = autoscaling.OffsetsReading(view.read_at, app_id, offsets) if offsets else None
    previous = state.swap_reading(f"{app.namespace}/{app.name}", reading)
    current = runs[active].app.spec.replicas
    sample = autoscaling.sample_from_offsets(previous, reading, current) if reading is not None else None
    sample = autoscaling.with_pods(sample, _pod_samples(state, app, active))
    sts_status = (sts.get(active) or {}).get("status") or {}
    roles = view.roles.get(app_id) if fresh else None  # None: unknown (a rebalance is on)
    marked = _drain_pods(app, active, before.step if before is not None else None)
    observed = autoscaling.Observed(
        pods=int(sts_status.get("replicas") or 0),
        ready=int(sts_status.get("readyReplicas") or 0),
        members=roles.members if roles is not None else None,
        # warmups still catching up, from the group's last assignment: a scale-out ends at none
        warmups=roles.warmups if roles is not None else None,
        # what the Pods marked to go still run; under Rolling the workers read no control
        # topic, so nothing drains and a scale-in removes its Pods at once (docs/operations.md)
        draining_actives=(roles.actives_on(marked) if roles is not None else None) if _drains(app) else 0,
        failing=_failing(state.kube, app, sts, runs).get(active, ""),
    )
    return autoscaling.autoscale(
        autoscaling.Inputs(
            policy=policy,
            state=before,
            sample=sample,
            now=time.time(),
            active=active,
            colors=app.colors,
            observed=observed,
            tasks=autoscaling.task_count(offsets, app_id) if offsets else 0,
            standby_replicas={c: r.app.spec.standby_replicas for c, r in runs.items()},
            spec_replicas=app.spec.replicas,
            processes_per_pod=app.spec.processes_per_pod,
            deploy_phase=plan.record.phase,
            deploy_target=plan.record.target,
        )
    )


def _scale_holds(
    app: StreamApp,
    scaled: autoscaling.AutoscalingState | None,
    sts: dict[Color, dict[str, Any] | None],
    active: Color,
) -> dict[str, str]:
    """Why a deploy's flip, and why a rollback's, must wait for the autoscaler (deploy.Inputs)."""
    if scaled is None or len(app.colors) < 2:
        return {}
    to = other(active)
    pods = ((sts.get(to) or {}).get("status") or {}).get("replicas")
    to_pods = int(pods) if pods is not None else None
    return {
        "scale_hold": autoscaling.flip_hold(scaled, to, to_pods) or "",
        "scale_hold_rollback": autoscaling.flip_hold(scaled, to, to_pods, rollback=True) or "",
    }


def _drains(app: StreamApp) -> bool:
    """Whether the app's workers follow a control topic, which carries the drain marks."""
    return app.spec.upgrade.strategy == "BlueGreen"


def _drain_pods(app: StreamApp, color: Color, step: autoscaling.Step | None) -> frozenset[str]:
    """The Pods of ``color`` a scale step marks to go (names: the StatefulSet's ordinals)."""
    if step is None or step.color != color:
        return frozenset()
    return frozenset(f"{color_name(app, color)}-{i}" for i in autoscaling.drain_ordinals(step))


def _mark_drains(state: OperatorState, app: StreamApp, view: KafkaView, scaled: autoscaling.Pass) -> None:
    """Tell each color's workers which of their Pods go (the control topic's Draining record),
    when that changed: the marked ones report it at their next join and the leader moves their
    actives away. A write that fails is retried next pass."""
    if not _drains(app) or "message" in view.topics:
        return
    key = f"{app.namespace}/{app.name}"
    step = scaled.state.step
    for color in app.colors:
        pods = _drain_pods(app, color, step)
        if not state.drains_changed(key, color, pods):
            continue
        try:
            flips.write_draining(app.spec.kafka.bootstrap_servers, app.control_topic, view.extra, color, pods)
        except Exception as exc:  # the broker going away: the next pass writes it again
            state.drains_unknown(key, color)
            log.warning(
                "drain marks not written",
                extra={"app": key, "color": color, "pods": sorted(pods), "error": str(exc)},
            )
        else:
            log.info("drain marks written", extra={"app": key, "color": color, "pods": sorted(pods)})


def _pod_samples(
    state: OperatorState, app: StreamApp, color: Color
) -> tuple[autoscaling.PodSample, ...] | None:
    """The color's Pods' own figures (busy fraction, processed rate, p99) between this pass's
    scrape of their /metrics and the last one (``pod_metrics``); None unless every Ready Pod
    answered both: then the offsets' even split stands (one silent Pod would otherwise make
    the others look like all the capacity there is)."""
    pods = state.kube.pods(app.namespace, selector_string(app, color))
    readings, complete = pod_metrics.scrape(pods, app.spec.worker.metrics_port, time.time)
    previous = state.swap_pod_readings(f"{app.namespace}/{app.name}", readings)
    return autoscaling.pod_samples(previous, readings) if complete else None


def _failing(
    kube: Kube, app: StreamApp, sts: dict[Color, dict[str, Any] | None], runs: dict[Color, ColorRun]
) -> dict[Color, str]:
    """Colors whose Pods cannot start by themselves (see ``pods_failing``). Pods are listed only
    for a color that exists and is not rolled out, so an app at rest costs no request."""
    out: dict[Color, str] = {}
    for color in app.colors:
        state = sts.get(color)
        run = runs[color].app
        if state is None or color_readiness(state, run.spec.replicas, spec_hash(run.spec)).ready:
            continue
        why = pods_failing(kube.pods(app.namespace, selector_string(app, color)))
        if why is not None:
            out[color] = why
    return out


def _lag(
    app: StreamApp, record: DeployRecord | None, view: KafkaView | None, previous: dict[str, Any]
) -> dict[Color, int | None]:
    """Each color's lag under the application id it runs now (fresh, else as last written)."""
    fresh = view.lag if view is not None and "message" not in view.topics else None
    return {
        c: int(v) if v is not None else None
        for c, v in _by_color(app, record, fresh, previous, "lag").items()
    }


def _standbys(
    app: StreamApp, record: DeployRecord | None, view: KafkaView | None, previous: dict[str, Any]
) -> dict[Color, dict[str, int]]:
    """Each color's standby coverage under the application id it runs now (fresh, else as last written)."""
    fresh = view.standbys if view is not None and "message" not in view.topics else None
    return {c: v for c, v in _by_color(app, record, fresh, previous, "standbys").items() if v is not None}


def _by_color(
    app: StreamApp,
    record: DeployRecord | None,
    fresh: Mapping[str, Any] | None,
    previous: dict[str, Any],
    key: str,
) -> dict[Color, Any]:
    """A per-application-id value for each color: read this pass, else what the status held for that id."""
    out: dict[Color, Any] = {}
    colors_before = previous.get("colors") or {}
    for color in app.colors:
        gen = record.colors[color].generation if record is not None and color in record.colors else 0
        app_id = app.color_application_id(color, gen)
        if fresh is not None:
            out[color] = fresh.get(app_id)
        else:
            before = colors_before.get(color) or {}
            out[color] = before.get(key) if before.get("applicationId") == app_id else None
    return out


def _views(
    app: StreamApp,
    sts: dict[Color, dict[str, Any] | None],
    record: DeployRecord | None,
    runs: dict[Color, ColorRun],
    lag: dict[Color, int | None],
) -> dict[Color, ColorView]:
    views: dict[Color, ColorView] = {}
    for color in app.colors:
        want = spec_hash(runs[color].app.spec)
        readiness = color_readiness(sts.get(color), runs[color].app.spec.replicas, want)
        assignment = record.colors.get(color) if record is not None else None
        views[color] = ColorView(
            readiness.ready,
            lag.get(color),
            readiness.message,
            sts.get(color) is not None,
            assignment or Assignment(want, runs[color].generation),
        )
    return views


def _apply_all(  # noqa: PLR0917
    kube: Kube,
    app: StreamApp,
    body: dict[str, Any],
    events: EventSink,
    outcome: Outcome,
    runs: dict[Color, ColorRun] | None = None,
    flip_in_progress: bool = False,
    compactor_image: str = DEFAULT_COMPACTOR_IMAGE,
    node_reader_role: str = DEFAULT_NODE_READER_ROLE,
    compactor_role: str = DEFAULT_COMPACTOR_ROLE,
) -> str | None:
    """Apply the objects that differ from what is live (see baton.operator.core.drift); dry-run
    them all first, so a spec the cluster refuses is never half-applied."""
    try:
        desired = desired_objects(
            app,
            runs,
            flip_in_progress=flip_in_progress,
            compactor_image=compactor_image,
            node_reader_role=node_reader_role,
            compactor_role=compactor_role,
        )
    except ValueError as exc:
        events(body, "Warning", "SpecRefused", str(exc))
        return str(exc)
    live = {
        _ref(o): kube.get(
            o["apiVersion"],
            o["kind"],
            o["metadata"]["name"],
            "" if (o["apiVersion"], o["kind"]) in CLUSTER_KINDS else app.namespace,
        )
        for o in desired
    }
    objects = [drift.stamped(keep_claim_templates(o, live[_ref(o)])) for o in desired]
    changed = [o for o in objects if not drift.up_to_date(live[_ref(o)], o)]
    try:
        for obj in changed:
            kube.apply(obj, dry_run=True)
    except RefusedError as exc:
        events(body, "Warning", "SpecRefused", str(exc))
        return str(exc)
    for obj in changed:
        before = live[_ref(obj)]
        after = kube.apply(obj)
        if before is None:
            outcome.applied.append(_ref(obj))
            events(body, "Normal", "Created", f"created {_ref(obj)}")
        elif before["metadata"]["resourceVersion"] != after["metadata"]["resourceVersion"]:
            outcome.applied.append(_ref(obj))
            events(body, "Normal", "Updated", f"updated {_ref(obj)} to generation {app.generation}")
            if drift.schedule_changed(before, after):
                kube.reschedule(after)
    _check_spark_account(kube, app, body, events, changed)
    if any(o["kind"] == "StatefulSet" for o in changed):  # a pass at rest lists no claims
        _expand_claims(kube, app, body, events)
    wanted = {(o["kind"], o["metadata"]["name"]) for o in objects}
    owned = kube.owned(app.name, app.uid or "", app.namespace)
    for api_version, kind in CLUSTER_KINDS:  # no owner reference: the app's by its labels
        owned += kube.labelled(api_version, kind, binding_selector(app.namespace, app.name))
    for obj in owned:
        if (obj["kind"], obj["metadata"]["name"]) not in wanted:
            kube.delete(obj)
            outcome.pruned.append(_ref(obj))
            events(body, "Normal", "Pruned", f"deleted {_ref(obj)}: no longer part of the spec")
    return None


def _expand_claims(kube: Kube, app: StreamApp, body: dict[str, Any], events: EventSink) -> None:
    """Raise the workers' claims to spec.state.size (claims.py says why here)."""
    if app.spec.state.store != "rocksdb":
        return
    found = kube.list("v1", "PersistentVolumeClaim", app.namespace, f"{LABEL_APP}={app.name}")
    for name in undersized(found, app.spec.state.size):
        try:
            kube.apply(expansion(name, app.namespace, app.spec.state.size))
        except RefusedError as exc:
            events(body, "Warning", "ClaimNotExpanded", f"claim {name} not expanded: {exc}")
            continue
        events(body, "Normal", "ClaimExpanded", f"claim {name} asked for {app.spec.state.size}")


def keep_claim_templates(obj: dict[str, Any], live: dict[str, Any] | None) -> dict[str, Any]:
    """A StatefulSet that exists keeps its own volume claim templates, which the API server
    never lets change: claim labels and annotations added to spec.podTemplate later reach the
    claims of StatefulSets created from then on (a color's first, a Rebuild), instead of every
    update of the app being refused."""
    if obj["kind"] != "StatefulSet" or live is None:
        return obj
    claims = [
        {k: v for k, v in claim.items() if k != "status"}
        for claim in live["spec"].get("volumeClaimTemplates") or []
    ]
    return {**obj, "spec": {**obj["spec"], "volumeClaimTemplates": claims}}


def _check_spark_account(
    kube: Kube, app: StreamApp, body: dict[str, Any], events: EventSink, changed: list[dict[str, Any]]
) -> None:
    """Say when a cluster runner's driver account is missing, once per change of the compactor.

    Why: the operator cannot make it (it may not grant the right to create Pods), and without
    it every run fails where no one looks: a Job whose Pod is never created, or a
    SparkApplication whose driver is refused."""
    needed = spark_account(body.get("spec", {}).get("compaction") or {})
    if needed is None or not any(o["kind"] in {"CronJob", "ScheduledSparkApplication"} for o in changed):
        return
    account, remedy = needed
    if kube.get("v1", "ServiceAccount", account, app.namespace) is None:
        events(
            body,
            "Warning",
            "CompactionAccountMissing",
            f"the compaction driver's ServiceAccount {account} does not exist in {app.namespace}, "
            f"so compaction runs cannot start: {remedy}",
        )


def write_status(
    kube: Kube,
    app: StreamApp,
    body: dict[str, Any],
    observed: Observed,
    events: EventSink,
    *,
    plan: Plan | None = None,
    runs: dict[Color, ColorRun] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Compute and write the status; announce Ready/Stalled transitions as Events."""
    previous = body.get("status") or {}
    runs = runs or color_runs(app, None)
    wants = {c: spec_hash(r.app.spec) for c, r in runs.items()}
    status = compute_status(
        app,
        observed,
        wants,
        previous.get("conditions"),
        plan=plan,
        generations={c: r.generation for c, r in runs.items()},
        replicas={c: r.app.spec.replicas for c, r in runs.items()},
    )
    for key in ("topics", "lag", "lastFlip", "deploy"):
        if key not in status and key in previous:
            status[key] = previous[key]  # keep what we learned while Kafka is unreachable
    status.update(extra or {})
    was = {c["type"]: c["status"] for c in previous.get("conditions") or []}
    now = {c["type"]: c for c in status["conditions"]}
    if now["Ready"]["status"] == "True" and was.get("Ready") != "True":
        events(body, "Normal", "Ready", f"all replicas ready: {status['message']}")
    if now["Stalled"]["status"] == "True" and was.get("Stalled") != "True":
        events(body, "Warning", "Stalled", status["message"])
    if status.get("phase") != previous.get("phase"):
        events(
            body,
            "Normal",
            "Phase",
            f"{previous.get('phase', 'None')} -> {status['phase']}: {status['message']}",
        )
    if status != {k: previous.get(k) for k in status}:
        kube.apply_status(app.name, app.namespace, status)
    return status


def _parse(kube: Kube, body: dict[str, Any], events: EventSink) -> StreamApp | None:
    """The app, or None when this operator cannot parse its spec (a newer CRD's field): then the
    status says which fields and to upgrade the operator, once per generation an Event too,
    and nothing is applied; the pass ends normally instead of failing into kopf's retries."""
    try:
        return StreamApp.from_body(body)
    except ValidationError as exc:
        problems = spec_problems(exc)
    meta = body["metadata"]
    previous = body.get("status") or {}
    stalled: dict[str, Any] = next(
        (c for c in previous.get("conditions") or [] if c.get("type") == "Stalled"), {}
    )
    if not (
        stalled.get("reason") == "SpecNotUnderstood"
        and previous.get("observedGeneration") == meta.get("generation")
    ):
        events(body, "Warning", "SpecNotUnderstood", "; ".join(problems))
        log.warning(
            "spec not understood",
            extra={"app": f"{meta.get('namespace')}/{meta.get('name')}", "problems": problems},
        )
    kube.apply_status(meta["name"], meta["namespace"], not_understood_status(body, problems, __version__))
    return None


def refresh_status(
    state: OperatorState, namespace: str, name: str, events: EventSink
) -> dict[str, Any] | None:
    """After a StatefulSet changed: run the deploy machine and write status; apply objects only
    when the machine gave a color another revision (cheap on the many Pod-readiness events)."""
    with state.lock(f"{namespace}/{name}"):
        done = _pass(state, namespace, name, events, None, apply=False)
    return done[0].status if done is not None else None


def delete_cluster_objects(kube: Kube, namespace: str, name: str) -> list[str]:
    """The deleted app's cluster-scoped objects (its workers' ClusterRoleBinding), which the
    garbage collector cannot tie to it: deleted by their labels, as listed now (finalizer step)."""
    deleted = []
    for api_version, kind in CLUSTER_KINDS:
        for obj in kube.list(api_version, kind, None, binding_selector(namespace, name)):
            kube.delete(obj)
            deleted.append(_ref(obj))
    return deleted


def delete_topics(state: OperatorState, body: dict[str, Any], events: EventSink) -> list[str]:
    """The DeleteTopics deletion policy: delete the app's internal topics (finalizer step)."""
    app = StreamApp.from_body(body)
    admin, _, why_not = _kafka_admin(state, app)
    if admin is None:
        raise topics.KafkaUnavailableError(why_not or "no Kafka access")
    deleted = topics.delete_internal_topics(admin, app.application_id)
    events(body, "Normal", "TopicsDeleted", f"deleted internal topics: {', '.join(deleted) or 'none found'}")
    return deleted
