"""One reconciliation of one StreamApp: read it fresh, apply the desired objects, write status.

Idempotent by construction (server-side apply of pure builders' output), so a crash at any
point is repaired by the next run; the handlers call it on every change, on resume and on a
timer. Reconciliations of the same app are serialised by a lock, and each one re-reads the
StreamApp first, so a stale body can never roll the app back to an older spec.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from baton.operator import topics
from baton.operator.builders import desired_objects
from baton.operator.builders.statefulset import spec_hash
from baton.operator.constants import API_VERSION, KIND, Color
from baton.operator.kube import Kube, RefusedError
from baton.operator.spec import StreamApp
from baton.operator.status import Observed, compute_status

log = logging.getLogger(__name__)

# (body, type "Normal"/"Warning", reason, message): posts a Kubernetes Event (kopf in the operator).
EventSink = Callable[[dict[str, Any], str, str, str], None]

_locks: dict[str, threading.Lock] = {}
_locks_guard = threading.Lock()
# One AdminClient per app and Kafka config: each client owns threads and connections.
_admins: dict[str, tuple[str, Any]] = {}


def _lock(key: str) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(key, threading.Lock())


@dataclass
class Outcome:
    """What one reconciliation did, for logs and tests."""

    applied: list[str] = field(default_factory=list)  # "Kind/name" whose resourceVersion changed
    pruned: list[str] = field(default_factory=list)
    status: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _ref(obj: dict[str, Any]) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}"


def _observe(kube: Kube, app: StreamApp) -> dict[Color, dict[str, Any] | None]:
    return {c: kube.get("apps/v1", "StatefulSet", f"{app.name}-{c}", app.namespace) for c in app.colors}


def _kafka_admin(kube: Kube, app: StreamApp) -> tuple[Any, str | None]:
    """An AdminClient for the app's cluster, or (None, why not)."""
    secret_ref = app.spec.kafka.secret_ref
    secret = None
    if secret_ref is not None and app.spec.kafka.security_protocol != "PLAINTEXT":
        secret = kube.secret_data(secret_ref.name, app.namespace)
        if secret is None:
            return None, (
                f"the operator cannot read Secret {secret_ref.name}; "
                "the workers create the internal topics themselves"
            )
    config = topics.admin_config(app, secret)
    key, fingerprint = f"{app.namespace}/{app.name}", repr(sorted(config.items()))
    with _locks_guard:
        cached = _admins.get(key)
        if cached is None or cached[0] != fingerprint:
            _admins[key] = cached = (fingerprint, topics.new_admin(config))
    return cached[1], None


def _manage_topics(
    kube: Kube,
    app: StreamApp,
    body: dict[str, Any],
    events: EventSink,
) -> tuple[dict[str, str], dict[Color, int]]:
    """Ensure the control topic and read lag; never raises for Kafka trouble (status says it)."""
    admin, why_not = _kafka_admin(kube, app)
    if admin is None:
        return {"message": why_not or ""}, {}
    result: dict[str, str] = {}
    lag: dict[Color, int] = {}
    try:
        if app.spec.upgrade.strategy == "BlueGreen":
            known = ((body.get("status") or {}).get("topics") or {}).get("control")
            if known != app.control_topic and topics.ensure_control_topic(
                admin, app.control_topic, app.spec.kafka.replication_factor
            ):
                events(body, "Normal", "TopicCreated", f"created control topic {app.control_topic}")
            result["control"] = app.control_topic
        for color in app.colors:
            value = topics.consumer_lag(admin, app.color_application_id(color))
            if value is not None:
                lag[color] = value
    except topics.KafkaUnavailableError as exc:
        result["message"] = f"Kafka: {exc}"
    return result, lag


def reconcile(kube: Kube, namespace: str, name: str, events: EventSink, kafka: bool = True) -> Outcome | None:
    """Bring one StreamApp's objects and status in line with its spec. None if it is gone."""
    with _lock(f"{namespace}/{name}"):
        body = kube.get(API_VERSION, KIND, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        app = StreamApp.from_body(body)
        outcome = Outcome()
        previous_status = body.get("status") or {}
        if not app.spec.paused:
            outcome.error = _apply_all(kube, app, body, events, outcome)
        observed = Observed(
            statefulsets=_observe(kube, app),
            active_color=previous_status.get("activeColor") or app.colors[0],
            error=outcome.error,
        )
        outcome.status = write_status(kube, app, body, observed, events)
    # Kafka may be slow or away: talk to it outside the lock, then fold the result into status.
    if kafka and outcome.error is None and not app.spec.paused:
        topic_status, lag = _manage_topics(kube, app, body, events)
        outcome.status = (
            refresh_status(kube, namespace, name, events, topic_status=topic_status, lag=lag)
            or outcome.status
        )
    return outcome


def _apply_all(
    kube: Kube,
    app: StreamApp,
    body: dict[str, Any],
    events: EventSink,
    outcome: Outcome,
) -> str | None:
    """Dry-run every object first, so a spec the cluster refuses is never half-applied."""
    objects = desired_objects(app)
    try:
        for obj in objects:
            kube.apply(obj, dry_run=True)
    except RefusedError as exc:
        events(body, "Warning", "SpecRefused", str(exc))
        return str(exc)
    for obj in objects:
        before = kube.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], app.namespace)
        after = kube.apply(obj)
        if before is None:
            outcome.applied.append(_ref(obj))
            events(body, "Normal", "Created", f"created {_ref(obj)}")
        elif before["metadata"]["resourceVersion"] != after["metadata"]["resourceVersion"]:
            outcome.applied.append(_ref(obj))
            events(body, "Normal", "Updated", f"updated {_ref(obj)} to generation {app.generation}")
    wanted = {(o["kind"], o["metadata"]["name"]) for o in objects}
    for obj in kube.owned(app.name, app.uid or "", app.namespace):
        if (obj["kind"], obj["metadata"]["name"]) not in wanted:
            kube.delete(obj)
            outcome.pruned.append(_ref(obj))
            events(body, "Normal", "Pruned", f"deleted {_ref(obj)}: no longer part of the spec")
    return None


def write_status(
    kube: Kube, app: StreamApp, body: dict[str, Any], observed: Observed, events: EventSink
) -> dict[str, Any]:
    """Compute and write the status; announce Ready/Stalled transitions as Events."""
    previous = body.get("status") or {}
    status = compute_status(app, observed, spec_hash(app.spec), previous.get("conditions"))
    if previous.get("topics") and "topics" not in status:
        status["topics"] = previous["topics"]  # keep what we learned while Kafka is unreachable
    if "lag" not in status and "lag" in previous:
        status["lag"] = previous["lag"]
    was = {c["type"]: c["status"] for c in previous.get("conditions") or []}
    now = {c["type"]: c for c in status["conditions"]}
    if now["Ready"]["status"] == "True" and was.get("Ready") != "True":
        events(body, "Normal", "Ready", f"all replicas ready: {status['message']}")
    if now["Stalled"]["status"] == "True" and was.get("Stalled") != "True":
        events(body, "Warning", "Stalled", status["message"])
    if status != {k: previous.get(k) for k in status}:
        kube.apply_status(app.name, app.namespace, status)
    return status


def refresh_status(
    kube: Kube,
    namespace: str,
    name: str,
    events: EventSink,
    *,
    topic_status: dict[str, str] | None = None,
    lag: dict[Color, int] | None = None,
) -> dict[str, Any] | None:
    """Status only (after a StatefulSet changed, or with news from Kafka): cheap, no apply."""
    with _lock(f"{namespace}/{name}"):
        body = kube.get(API_VERSION, KIND, name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return None
        app = StreamApp.from_body(body)
        previous = body.get("status") or {}
        stalled = next((c for c in previous.get("conditions") or [] if c.get("type") == "Stalled"), None)
        error = None
        same_gen = stalled is not None and stalled.get("observedGeneration") == app.generation
        if stalled is not None and same_gen and stalled.get("status") == "True":
            error = stalled.get("message")
        observed = Observed(
            statefulsets=_observe(kube, app),
            active_color=previous.get("activeColor") or app.colors[0],
            error=error,
            lag=lag if lag is not None else _previous_lag(previous),
            topics=topic_status or {},
        )
        return write_status(kube, app, body, observed, events)


def _previous_lag(status: dict[str, Any]) -> dict[Color, int]:
    colors: dict[Color, dict[str, Any]] = status.get("colors") or {}
    return {c: int(v["lag"]) for c, v in colors.items() if "lag" in v}


def delete_topics(kube: Kube, body: dict[str, Any], events: EventSink) -> list[str]:
    """The DeleteTopics deletion policy: delete the app's internal topics (finalizer step)."""
    app = StreamApp.from_body(body)
    admin, why_not = _kafka_admin(kube, app)
    if admin is None:
        raise topics.KafkaUnavailableError(why_not or "no Kafka access")
    deleted = topics.delete_internal_topics(admin, app.application_id)
    events(body, "Normal", "TopicsDeleted", f"deleted internal topics: {', '.join(deleted) or 'none found'}")
    return deleted
