"""kopf handlers: thin glue from watch events to :mod:`baton.operator.reconcile`.

- create/update/resume of a StreamApp: full reconcile of the Kubernetes objects (fast, no Kafka);
- a daemon per StreamApp: the deploy loop. It reads lag and the control topic, runs the deploy
  machine and its flips, and sleeps as long as the machine says (seconds during a deploy,
  30 s when stable) or until a change of the app wakes it;
- any change of a StatefulSet the operator owns: status refresh (fast `kubectl wait`);
- delete: delete the app's cluster-scoped objects (its workers' ClusterRoleBinding under
  spec.rack), which no owner reference ties to it; with deletionPolicy DeleteTopics, also its
  internal topics. kopf's finalizer (on every StreamApp: its daemon needs one) holds the
  deletion until both are done.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from dataclasses import dataclass
from typing import Any, cast

import kopf

from baton.operator import reconcile as rec
from baton.operator.cache import ObjectCache
from baton.operator.core.backoff import EndlessBackoff
from baton.operator.core.builders.rack import DEFAULT_NODE_READER_ROLE
from baton.operator.core.compaction.cronjob import DEFAULT_COMPACTOR_ROLE
from baton.operator.core.compaction.cronjob import DEFAULT_IMAGE as DEFAULT_COMPACTOR_IMAGE
from baton.operator.core.compaction.jobs import COMPONENT, COMPONENT_LABEL, last_result, result_of
from baton.operator.core.constants import API_VERSION, FINALIZER, GROUP, KIND, LABEL_APP, PLURAL, VERSION
from baton.operator.core.deploy import ANNOTATION_PROMOTE, ANNOTATION_ROLLBACK
from baton.operator.core.status import pods_failing
from baton.operator.kube import CLUSTER_KINDS, MANAGED_KINDS, Kube
from baton.operator.metrics import METRICS
from baton.operator.state import OperatorState
from baton.operator.topics import KafkaUnavailableError


@dataclass(frozen=True)
class Options:
    """Operator settings from the command line, passed to kopf through its memo."""

    kafka: bool = True
    compactor_image: str = DEFAULT_COMPACTOR_IMAGE
    node_reader_role: str = DEFAULT_NODE_READER_ROLE
    compactor_role: str = DEFAULT_COMPACTOR_ROLE
    workers: int = 16  # passes running at once, over all apps (OperatorState.workers)
    watch_cache: bool = True  # off: every read is a request (to compare, or to rule the cache out)


def _events(body: dict[str, Any], type_: str, reason: str, message: str) -> None:
    # Event messages are limited to 1 KiB by the API server.
    kopf.event(cast(kopf.Body, body), type=type_, reason=reason, message=message[:1000])


MANAGED_BY = "app.kubernetes.io/managed-by=baton-operator"


def _feed(memo: kopf.Memo, body: kopf.Body, type: str | None) -> None:
    """Keep the operator's object cache current (see baton.operator.cache)."""
    cache: ObjectCache | None = memo.get("cache")
    if cache is not None:
        cache.observe(dict(body), deleted=type == "DELETED")


# Owned kinds, the cluster-scoped ones made for apps, the workers' Pods (their failures go into
# the status) and the StreamApps.
CACHED_KINDS = (*MANAGED_KINDS, *CLUSTER_KINDS, ("v1", "Pod"), (API_VERSION, KIND))


def _register_cache_feeds() -> None:
    """One watch per owned kind (StatefulSets, Pods and StreamApps have handlers of their own);
    kopf watches a cluster-scoped kind cluster-wide, also when it watches only some namespaces."""
    for api_version, kind in (*MANAGED_KINDS, *CLUSTER_KINDS):
        if kind == "StatefulSet":
            continue
        group, _, version = api_version.rpartition("/")

        async def feed(*, memo: kopf.Memo, body: kopf.Body, type: str | None, **_: Any) -> None:
            _feed(memo, body, type)

        kopf.on.event(group=group, version=version, kind=kind, id=f"cache-{kind}")(feed)


@kopf.on.event("", "v1", "pods", id="cache-Pod", labels={LABEL_APP: kopf.PRESENT})
async def on_pod(
    *, memo: kopf.Memo, body: kopf.Body, namespace: str | None, type: str | None, **_: Any
) -> None:
    """Cache the workers' Pods; one that cannot start wakes its app (status: PodsFailing)."""
    _feed(memo, body, type)
    app = (body.get("metadata", {}).get("labels") or {}).get(LABEL_APP)
    if app and type != "DELETED" and pods_failing([dict(body)]) is not None:
        _state(memo).wake(f"{namespace}/{app}")


_register_cache_feeds()


def _state(memo: kopf.Memo) -> OperatorState:
    state: OperatorState = memo["state"]
    return state


def _kube(memo: kopf.Memo) -> Kube:
    return _state(memo).kube


def _options(memo: kopf.Memo) -> Options:
    options: Options = memo.get("options", Options())
    return options


@kopf.on.startup()
async def configure(*, settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    # Progress and the diff base live in annotations: the status belongs to baton alone.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 300
    # An API outage longer than kopf's default retries would silently end the watch of StreamApps.
    settings.networking.error_backoffs = EndlessBackoff()
    settings.execution.max_workers = 8
    # Owned objects are watched with a server-side label selector: never every Service or Role
    # of the cluster, only the operator's.
    for api_version, kind in (*MANAGED_KINDS, *CLUSTER_KINDS):
        group, _slash, version = api_version.rpartition("/")
        settings.watching.label_selectors[group, version, kind] = MANAGED_BY
    settings.watching.label_selectors["batch", "v1", "Job"] = MANAGED_BY
    settings.watching.label_selectors["", "v1", "Pod"] = MANAGED_BY  # the workers' Pods
    options = _options(memo)
    cache = ObjectCache(CACHED_KINDS) if options.watch_cache else None
    memo["cache"] = cache
    memo["state"] = OperatorState(
        Kube.connect(cache),
        kafka=options.kafka,
        compactor_image=options.compactor_image,
        node_reader_role=options.node_reader_role,
        compactor_role=options.compactor_role,
        workers=options.workers,
    )
    memo["loop"] = asyncio.get_running_loop()


def _reconcile(memo: kopf.Memo, namespace: str | None, name: str, logger: kopf.Logger) -> None:
    assert namespace is not None, "StreamApp is namespaced"
    try:
        outcome = rec.reconcile(_state(memo), namespace, name, _events, kafka=False)
    except Exception as exc:  # transient API trouble: kopf retries soon
        raise kopf.TemporaryError(f"reconcile failed: {exc}", delay=3) from exc
    if outcome is not None and (outcome.applied or outcome.pruned or outcome.error):
        logger.info(f"applied {outcome.applied}, pruned {outcome.pruned}, error {outcome.error}")


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def on_change(*, memo: kopf.Memo, namespace: str | None, name: str, logger: kopf.Logger, **_: Any) -> None:
    if namespace is not None:
        # a fresh read, not the event's body: a watch opened before a CRD upgrade delivers
        # objects pruned by the old schema (see baton.operator.cache)
        _kube(memo).read(API_VERSION, KIND, name, namespace)
    _reconcile(memo, namespace, name, logger)
    _wake_soon(memo)  # the deploy loop looks at the change now


def _wake(memo: kopf.Memo) -> asyncio.Event:
    """The per-app event that wakes its deploy loop (kopf gives each object its own memo copy)."""
    event: asyncio.Event | None = memo.get("wake")
    if event is None:
        memo["wake"] = event = asyncio.Event()
    return event


@kopf.daemon(GROUP, VERSION, PLURAL, cancellation_backoff=1.0, cancellation_timeout=30.0)
async def deploy_loop(
    *, memo: kopf.Memo, namespace: str | None, name: str, logger: kopf.Logger, stopped: Any, **_: Any
) -> None:
    """Undo drift, refresh lag, and drive deploys and flips, one app at a time.

    Kafka work (control topic, lag, flips) happens only here, so a slow or unreachable cluster
    never delays the handlers of spec changes and deletions. The pass runs in a worker thread
    (a flip blocks for up to its deadline); the loop itself only waits, so kopf can stop it at
    once when the app is deleted.
    """
    assert namespace is not None, "StreamApp is namespaced"
    wake = _wake(memo)
    loop = asyncio.get_running_loop()

    def wake_now() -> None:
        loop.call_soon_threadsafe(wake.set)

    _state(memo).on_wake(f"{namespace}/{name}", wake_now)
    await asyncio.sleep(0.5)
    while not stopped:
        wake.clear()
        delay = 30.0
        state = _state(memo)
        try:
            # kopf posts Events through context variables, which run_in_executor (unlike
            # asyncio.to_thread) does not carry into the thread: run the pass in a copy
            context = contextvars.copy_context()
            outcome = await asyncio.get_running_loop().run_in_executor(
                state.executor, context.run, rec.reconcile, state, namespace, name, _events
            )
        except Exception as exc:  # transient API trouble: try again soon
            logger.warning(f"deploy loop pass failed: {exc}")
            delay = 3.0
        else:
            if outcome is None:
                return
            delay = outcome.requeue_after
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(wake.wait(), timeout=delay)
    _state(memo).on_wake(f"{namespace}/{name}", None)


@kopf.on.event(GROUP, VERSION, PLURAL)
def on_annotation(
    *,
    memo: kopf.Memo,
    body: kopf.Body,
    meta: kopf.Meta,
    status: kopf.Status,
    namespace: str | None,
    name: str,
    type: str,
    **_: Any,
) -> None:
    """Wake the deploy loop for ``baton.dev/promote`` and ``baton.dev/rollback`` at once, and
    export the compactor's ``status.compaction`` as gauges.

    kopf leaves annotations under its own storage prefix (baton.dev/) out of the diff that
    triggers update handlers, and status changes out of it altogether, so the raw watch event
    is where a person's annotation and the compactor Job's status write show.
    """
    if type == "DELETED":
        _feed(memo, body, type)
    annotations = meta.get("annotations") or {}
    if ANNOTATION_PROMOTE in annotations or ANNOTATION_ROLLBACK in annotations:
        if namespace is not None:
            _kube(memo).read(API_VERSION, KIND, name, namespace)  # the pass must see it
        _wake_soon(memo)
    if type != "DELETED":
        METRICS.observe_compaction(namespace or "", name, status.get("compaction"))


@kopf.on.event(
    "batch",
    "v1",
    "jobs",
    labels={
        COMPONENT_LABEL: COMPONENT,
        "app.kubernetes.io/managed-by": "baton-operator",
        LABEL_APP: kopf.PRESENT,
    },
)
def on_compaction_job(
    *, memo: kopf.Memo, body: kopf.Body, namespace: str | None, type: str, **_: Any
) -> None:
    """The newest finished compaction Job of the app: the failure gauge, and a Warning Event on
    the StreamApp when a Job fails (once per Job and operator process)."""
    app = (body.get("metadata", {}).get("labels") or {}).get(LABEL_APP)
    if not app or namespace is None:
        return
    kube = _kube(memo)
    jobs = kube.list("batch/v1", "Job", namespace, f"{COMPONENT_LABEL}={COMPONENT},{LABEL_APP}={app}")
    latest = last_result(jobs)
    if latest is not None:
        METRICS.observe_compaction_job(namespace, app, latest.failed)
    this = result_of(dict(body)) if type != "DELETED" else None
    reported: set[str] = memo.setdefault("failed_jobs_reported", set())
    uid = str(body.get("metadata", {}).get("uid", ""))
    if this is None or not this.failed or uid in reported:
        return
    reported.add(uid)
    owner = kube.get(API_VERSION, KIND, app, namespace)
    if owner is not None:
        _events(
            owner,
            "Warning",
            "CompactionFailed",
            f"compaction Job {this.job} failed ({this.reason}): {this.message or 'see its Pod logs'}",
        )


def _wake_soon(memo: kopf.Memo) -> None:
    wake: asyncio.Event | None = memo.get("wake")
    loop: asyncio.AbstractEventLoop | None = memo.get("loop")
    if wake is not None and loop is not None:
        loop.call_soon_threadsafe(wake.set)


def _owner(body: kopf.Body) -> str | None:
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == "StreamApp" and ref.get("apiVersion", "").startswith(f"{GROUP}/"):
            return str(ref["name"])
    return None


@kopf.on.event("apps", "v1", "statefulsets", labels={"app.kubernetes.io/managed-by": "baton-operator"})
def on_statefulset(*, memo: kopf.Memo, body: kopf.Body, namespace: str | None, type: str, **_: Any) -> None:
    _feed(memo, body, type)
    owner = _owner(body)
    if owner is None or namespace is None:
        return
    if type == "DELETED":  # someone deleted it: recreate, unless its app is going too
        app = _kube(memo).read(API_VERSION, KIND, owner, namespace)  # the garbage collector's work?
        if app is not None and not app["metadata"].get("deletionTimestamp"):
            rec.reconcile(_state(memo), namespace, owner, _events, kafka=False)
        return
    rec.refresh_status(_state(memo), namespace, owner, _events)
    status, want = body.get("status") or {}, (body.get("spec") or {}).get("replicas", 0)
    if status.get("readyReplicas", 0) == status.get("updatedReplicas", 0) == want:
        _state(memo).wake(f"{namespace}/{owner}")  # rolled out: the deploy loop reads lag, rolls on


def _delete_topics_policy(*, spec: kopf.Spec, **_: Any) -> bool:
    return bool(spec.get("deletionPolicy") == "DeleteTopics")


@kopf.on.delete(GROUP, VERSION, PLURAL, optional=True)
def forget_app(*, memo: kopf.Memo, namespace: str | None, name: str, **_: Any) -> None:
    """Drop the deleted app's series and its part of the operator's state."""
    METRICS.forget(namespace or "", name)
    _state(memo).forget(f"{namespace}/{name}")


@kopf.on.cleanup()
async def close(*, memo: kopf.Memo, **_: Any) -> None:
    state: OperatorState | None = memo.get("state")
    if state is not None:
        state.close()


@kopf.on.delete(GROUP, VERSION, PLURAL, retries=20, backoff=3)
def release_cluster_objects(*, memo: kopf.Memo, namespace: str | None, name: str, **_: Any) -> None:
    """Delete the app's ClusterRoleBinding (spec.rack) before kopf lets the app go: the garbage
    collector cannot, since a namespaced owner cannot own a cluster-scoped object."""
    assert namespace is not None, "StreamApp is namespaced"
    try:
        rec.delete_cluster_objects(_kube(memo), namespace, name)
    except Exception as exc:
        if getattr(exc, "status", None) == 403:  # RBAC without ClusterRoleBindings made none either
            raise kopf.PermanentError(f"cannot list ClusterRoleBindings: {exc}") from exc
        raise kopf.TemporaryError(f"cannot delete the app's ClusterRoleBinding yet: {exc}", delay=3) from exc


@kopf.on.delete(GROUP, VERSION, PLURAL, when=_delete_topics_policy, retries=20, backoff=3)
def on_delete(*, memo: kopf.Memo, body: kopf.Body, **_: Any) -> None:
    try:
        rec.delete_topics(_state(memo), dict(body), _events)
    except KafkaUnavailableError as exc:
        raise kopf.TemporaryError(f"cannot delete topics yet: {exc}", delay=5) from exc
