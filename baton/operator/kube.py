"""The operator's Kubernetes I/O: server-side apply, reads, pruning and status writes.

Everything goes through the kubernetes client's DynamicClient, with one field manager, so
an object the operator wrote can be re-applied any number of times with the same result,
and a human's or another controller's fields (for example an HPA's replicas) are visible
in managedFields instead of silently overwritten.
"""

from __future__ import annotations

import base64
import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError, NotFoundError, ResourceNotFoundError

from baton import __version__
from baton.operator.cache import ObjectCache
from baton.operator.core.constants import API_VERSION, FIELD_MANAGER, KIND, LABEL_APP

T = TypeVar("T")

# Kinds the operator creates for an app, pruned when no longer desired.
MANAGED_KINDS: tuple[tuple[str, str], ...] = (
    ("apps/v1", "StatefulSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "Service"),
    ("v1", "ServiceAccount"),
    ("batch/v1", "CronJob"),
    ("sparkoperator.k8s.io/v1beta2", "ScheduledSparkApplication"),  # only where the Spark Operator is
    ("rbac.authorization.k8s.io/v1", "RoleBinding"),
)

# Cluster-scoped kinds the operator creates for an app (the workers' ClusterRoleBinding under
# spec.rack). A namespaced StreamApp cannot own them: they are found, pruned and deleted with
# the app by their labels (core/builders/rack.py), never by owner reference.
CLUSTER_KINDS: tuple[tuple[str, str], ...] = (("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),)

RETRIABLE = {409, 429, 500, 502, 503, 504}


class RefusedError(RuntimeError):
    """The API server refused an object for good (invalid, forbidden): retrying cannot help."""

    def __init__(self, obj: dict[str, Any], status: int, message: str) -> None:
        self.status = status
        kind, name = obj.get("kind"), obj.get("metadata", {}).get("name")
        super().__init__(f"{kind} {name} refused by the API server ({status}): {message}")


def _status_of(exc: Exception) -> int:
    return int(getattr(exc, "status", 0) or 0)


def _message_of(exc: Exception) -> str:
    body = getattr(exc, "body", None) or getattr(exc, "summary", lambda: str(exc))
    if isinstance(body, bytes):
        body = body.decode(errors="replace")
    if isinstance(body, str):
        try:
            return str(json.loads(body).get("message", body))
        except ValueError:
            return body
    return str(exc)


def with_retries(call: Callable[[], T], attempts: int = 5, delay: float = 0.2) -> T:
    """Retry conflicts, throttling and server errors with backoff; re-raise the rest."""
    for attempt in range(attempts):
        try:
            return call()
        except (ApiException, DynamicApiError) as exc:
            permanent = "convert" in _message_of(exc)
            if _status_of(exc) not in RETRIABLE or permanent or attempt == attempts - 1:
                raise
            time.sleep(delay * 2**attempt)
    raise AssertionError("unreachable")


# What the operator's requests say they are (the API server's audit log groups by it).
USER_AGENT = f"baton-operator/{__version__}"


@dataclass
class Kube:
    """A connection to the API server; with a ``cache``, reads of the kinds it covers come
    from the operator's watches (see baton.operator.cache) and writes' answers go into it."""

    dynamic: DynamicClient
    cache: ObjectCache | None = None

    @classmethod
    def connect(cls, cache: ObjectCache | None = None) -> Kube:
        """KUBECONFIG (or ~/.kube/config) when present, else the in-cluster ServiceAccount."""
        try:
            config.load_kube_config()  # type: ignore[no-untyped-call]
        except config.ConfigException:
            config.load_incluster_config()  # type: ignore[no-untyped-call]
        api = client.ApiClient()
        api.user_agent = USER_AGENT
        dynamic = DynamicClient(api)  # type: ignore[no-untyped-call]
        # The discovery cache is a file shared by every process talking to this server: one
        # written before a CRD was removed (the Spark Operator uninstalled) would send lists to
        # paths the server no longer serves. Start from what the server serves now.
        dynamic.resources.invalidate_cache()
        return cls(dynamic, cache)

    def _observe(self, obj: dict[str, Any]) -> dict[str, Any]:
        if self.cache is not None:
            self.cache.observe(obj)
        return obj

    def _resource(self, api_version: str, kind: str) -> Any:
        return self.dynamic.resources.get(api_version=api_version, kind=kind)

    def get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        """The object, from the cache when it has it (a miss is a GET: the watch may not have
        listed it yet)."""
        if self.cache is not None and self.cache.covers(api_version, kind):
            cached = self.cache.get(api_version, kind, name, namespace)
            if cached is not None:
                return cached
        return self.read(api_version, kind, name, namespace)

    def read(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        """The object as the API server has it now (a GET, never the cache)."""
        try:
            obj = with_retries(lambda: self._resource(api_version, kind).get(name=name, namespace=namespace))
        except (NotFoundError, ResourceNotFoundError):  # no such object, or a kind not served here
            if self.cache is not None:  # whatever the watches last said, it is gone now
                self.cache.forget(
                    {
                        "apiVersion": api_version,
                        "kind": kind,
                        "metadata": {"name": name, "namespace": namespace},
                    }
                )
            return None
        result: dict[str, Any] = obj.to_dict()
        result.setdefault("apiVersion", api_version)
        result.setdefault("kind", kind)
        return self._observe(result)

    def apply(self, obj: dict[str, Any], dry_run: bool = False) -> dict[str, Any]:
        """Server-side apply ``obj`` as the operator.

        Raises :class:`RefusedError` for a 4xx other than 409/429 (invalid, forbidden).
        """
        try:
            resource = self._resource(obj["apiVersion"], obj["kind"])
        except ResourceNotFoundError as exc:
            raise RefusedError(
                obj,
                404,
                f"this cluster does not serve {obj['kind']} ({obj['apiVersion']})"
                + (
                    ": install the Kubeflow Spark Operator, or set spec.compaction.runner to CronJob"
                    if obj["apiVersion"].startswith("sparkoperator.k8s.io/")
                    else ""
                ),
            ) from exc
        kwargs: dict[str, Any] = {"field_manager": FIELD_MANAGER, "force_conflicts": True}
        if dry_run:
            kwargs["dry_run"] = "All"
        try:
            result = with_retries(lambda: resource.server_side_apply(body=obj, **kwargs))
        except (ApiException, DynamicApiError) as exc:
            status, message = _status_of(exc), _message_of(exc)
            # The API server answers 500 for an object it cannot even convert (a bad quantity).
            unconvertible = status == 500 and "convert" in message
            if (400 <= status < 500 and status not in RETRIABLE) or unconvertible:
                raise RefusedError(obj, status, message) from exc
            raise
        applied: dict[str, Any] = result.to_dict()
        return applied if dry_run else self._observe(applied)

    def apply_status(self, name: str, namespace: str, status: dict[str, Any]) -> None:
        """Server-side apply of a StreamApp's status subresource."""
        resource = self._resource(API_VERSION, KIND)
        body = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": name, "namespace": namespace},
            "status": status,
        }
        try:
            result = with_retries(
                lambda: resource.status.server_side_apply(
                    body=body,
                    name=name,
                    namespace=namespace,
                    field_manager=FIELD_MANAGER,
                    force_conflicts=True,
                )
            )
        except NotFoundError:  # deleted meanwhile (the cache had not heard yet): nothing to report on
            if self.cache is not None:
                self.cache.forget(body)
            return
        self._observe(result.to_dict())

    def reschedule(self, obj: dict[str, Any]) -> None:
        """Make the Spark Operator compute a ScheduledSparkApplication's next run again.

        Why: it computes ``status.nextRun`` once, when it first sees the object, and keeps it
        when the schedule changes; a StreamApp's new ``spec.compaction.schedule`` would take
        effect only after the old schedule's next run. Clearing the schedule state (``""`` is
        its "new") and the next run makes it schedule from the current spec, as a CronJob does."""
        meta = obj["metadata"]
        with contextlib.suppress(NotFoundError):
            with_retries(
                lambda: self._resource(obj["apiVersion"], obj["kind"]).status.patch(
                    body={"status": {"scheduleState": None, "nextRun": None}},
                    name=meta["name"],
                    namespace=meta.get("namespace"),
                    content_type="application/merge-patch+json",
                )
            )

    def owned(self, app_name: str, app_uid: str, namespace: str) -> list[dict[str, Any]]:
        """Objects of the managed kinds that this app controls (by owner reference); from the
        cache when it covers them (what the watches have not listed yet is pruned next time)."""
        if self.cache is not None and all(self.cache.covers(v, k) for v, k in MANAGED_KINDS):
            return self.cache.owned(app_uid, namespace)
        found: list[dict[str, Any]] = []
        for api_version, kind in MANAGED_KINDS:
            try:
                resource = self._resource(api_version, kind)
                listing = with_retries(
                    lambda r=resource: r.get(  # type: ignore[misc]
                        namespace=namespace, label_selector=f"{LABEL_APP}={app_name}"
                    )
                )
            except ResourceNotFoundError:  # a kind this cluster does not serve owns nothing here
                continue
            except NotFoundError:  # served when discovery was cached, not now (a CRD removed)
                self.dynamic.resources.invalidate_cache()
                continue
            items = listing.to_dict()["items"]
            for item in items:
                refs = item.get("metadata", {}).get("ownerReferences") or []
                if any(r.get("uid") == app_uid and r.get("controller") for r in refs):
                    item.setdefault("apiVersion", api_version)
                    item.setdefault("kind", kind)
                    found.append(item)
        return found

    def delete(self, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        if self.cache is not None:
            self.cache.forget(obj)
        with contextlib.suppress(NotFoundError):
            with_retries(
                lambda: self._resource(obj["apiVersion"], obj["kind"]).delete(
                    name=meta["name"],
                    namespace=meta.get("namespace"),
                    body={"propagationPolicy": "Background", "preconditions": {"uid": meta.get("uid")}},
                )
            )

    def secret_data(self, name: str, namespace: str) -> dict[str, str] | None:
        """A Secret's decoded data, or None when missing or not readable by the operator's RBAC."""
        try:
            secret = client.CoreV1Api().read_namespaced_secret(name, namespace)
        except ApiException as exc:
            if exc.status in (403, 404):
                return None
            raise
        return {k: base64.b64decode(v).decode() for k, v in (secret.data or {}).items()}

    def remove_annotations(
        self, api_version: str, kind: str, name: str, namespace: str, keys: list[str]
    ) -> None:
        """Delete annotations (a merge patch with nulls), e.g. a consumed baton.dev/rollback."""
        if not keys:
            return
        resource = self._resource(api_version, kind)
        body = {"metadata": {"annotations": dict.fromkeys(keys)}}
        with contextlib.suppress(NotFoundError):
            patched = with_retries(
                lambda: resource.patch(
                    body=body, name=name, namespace=namespace, content_type="application/merge-patch+json"
                )
            )
            self._observe(patched.to_dict())

    def pods(self, namespace: str, selector: str, fresh: bool = False) -> list[dict[str, Any]]:
        """Pods matching an equality ``selector`` (``a=b,c=d``): from the cache unless ``fresh``
        (a decision that deletes a Pod reads them from the API server)."""
        if not fresh and self.cache is not None and self.cache.covers("v1", "Pod"):
            labels = dict(part.split("=", 1) for part in selector.split(",") if part)
            return self.cache.matching("v1", "Pod", namespace, labels)
        return self.list("v1", "Pod", namespace, selector)

    def labelled(self, api_version: str, kind: str, selector: str) -> list[dict[str, Any]]:
        """Cluster-scoped objects matching an equality ``selector`` (``a=b,c=d``), from the cache
        when it covers the kind."""
        if self.cache is not None and self.cache.covers(api_version, kind):
            labels = dict(part.split("=", 1) for part in selector.split(",") if part)
            return self.cache.matching(api_version, kind, "", labels)
        return self.list(api_version, kind, None, selector)

    def list(self, api_version: str, kind: str, namespace: str | None, selector: str) -> list[dict[str, Any]]:
        """Objects matching ``selector`` (a GET; ``namespace`` None for a cluster-scoped kind)."""
        listing = with_retries(
            lambda: self._resource(api_version, kind).get(namespace=namespace, label_selector=selector)
        )
        items: list[dict[str, Any]] = listing.to_dict()["items"]
        for item in items:  # a list's items do not say what they are; delete() needs it
            item.setdefault("apiVersion", api_version)
            item.setdefault("kind", kind)
        return items
