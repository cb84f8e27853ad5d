"""The few API calls the pod runner makes, with plain dicts in and out.

Everything goes through the kubernetes python client: the dynamic client for objects
(dicts, any kind) and ``kubernetes.watch`` for list + watch of Pods.
"""

from __future__ import annotations

import base64
import contextlib
import json
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, cast

from kubernetes import client, config, dynamic, watch
from kubernetes.client.exceptions import ApiException
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError

MERGE = "application/merge-patch+json"


class Api:
    def __init__(self, kubeconfig: str | None = None) -> None:
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)  # type: ignore[no-untyped-call]
        self.configuration = cfg
        self.api_client = client.ApiClient(cfg)
        self.core = client.CoreV1Api(self.api_client)
        self.dynamic = dynamic.DynamicClient(self.api_client)  # type: ignore[no-untyped-call]
        self._resources: dict[tuple[str, str], Any] = {}
        self._lock = threading.Lock()

    @property
    def server(self) -> str:
        return str(self.configuration.host)

    def resource(self, api_version: str, kind: str) -> Any:
        with self._lock:
            key = (api_version, kind)
            if key not in self._resources:
                self._resources[key] = self.dynamic.resources.get(api_version=api_version, kind=kind)
            return self._resources[key]

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        try:
            obj = self.resource(api_version, kind).get(name=name, namespace=namespace)
        except NotFoundError:
            return None
        result: dict[str, Any] = obj.to_dict()
        return result

    def list_objects(self, api_version: str, kind: str, **kwargs: Any) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = self.resource(api_version, kind).get(**kwargs).to_dict()["items"]
        return items

    def create(
        self, api_version: str, kind: str, body: Mapping[str, Any], namespace: str | None = None
    ) -> bool:
        """Create; False when it already exists."""
        try:
            self.resource(api_version, kind).create(body=dict(body), namespace=namespace)
        except ConflictError:
            return False
        return True

    def patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        body: Mapping[str, Any],
        namespace: str | None = None,
        *,
        status: bool = False,
    ) -> None:
        resource = self.resource(api_version, kind)
        if status:
            resource = resource.status
        resource.patch(body=dict(body), name=name, namespace=namespace, content_type=MERGE)

    def delete(
        self,
        api_version: str,
        kind: str,
        name: str,
        namespace: str | None = None,
        *,
        grace: int | None = None,
        uid: str | None = None,
    ) -> None:
        body: dict[str, Any] = {}
        if grace is not None:
            body["gracePeriodSeconds"] = grace
        if uid is not None:
            body["preconditions"] = {"uid": uid}
        with contextlib.suppress(NotFoundError, ConflictError):
            self.resource(api_version, kind).delete(name=name, namespace=namespace, body=body)

    def data(self, kind: str, namespace: str, name: str) -> dict[str, str] | None:
        """A Secret's (decoded) or a ConfigMap's data, None when it does not exist."""
        obj = self.get("v1", kind, name, namespace)
        if obj is None:
            return None
        if kind == "Secret":
            return {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
        return {**(obj.get("data") or {}), **(obj.get("binaryData") or {})}

    def watch_pods(
        self,
        namespace: str | None,
        label_selector: str | None,
        on_list: Callable[[list[dict[str, Any]]], None],
        on_event: Callable[[str, dict[str, Any]], None],
        stop: threading.Event,
    ) -> None:
        """List then watch Pods until ``stop``; relist on expiry or error (``on_list`` sees every relist)."""
        while not stop.is_set():
            try:
                for kind, obj in self._list_then_watch(namespace, label_selector, on_list, stop):
                    on_event(kind, obj)
            except ApiException as exc:
                if exc.status != 410:
                    stop.wait(1.0)
            except Exception:  # a dropped connection: relist after a moment
                stop.wait(1.0)

    def _list_then_watch(
        self,
        namespace: str | None,
        label_selector: str | None,
        on_list: Callable[[list[dict[str, Any]]], None],
        stop: threading.Event,
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        kwargs: dict[str, Any] = {}
        if label_selector:
            kwargs["label_selector"] = label_selector
        if namespace:
            listed = self.core.list_namespaced_pod(namespace, _preload_content=False, **kwargs)
        else:
            listed = self.core.list_pod_for_all_namespaces(_preload_content=False, **kwargs)
        body = json.loads(cast(Any, listed).data)
        on_list(body["items"])
        version = body["metadata"]["resourceVersion"]
        while not stop.is_set():
            w = watch.Watch()  # type: ignore[no-untyped-call]
            args = (
                (self.core.list_namespaced_pod, namespace)
                if namespace
                else (self.core.list_pod_for_all_namespaces,)
            )
            for event in w.stream(  # type: ignore[no-untyped-call]
                *args,
                resource_version=version,
                timeout_seconds=20,
                allow_watch_bookmarks=True,
                deserialize=False,
                **kwargs,
            ):
                obj = event["object"]
                if event["type"] == "ERROR":
                    if obj.get("code") == 410:
                        return  # expired: relist
                    raise RuntimeError(f"watch error: {obj}")
                version = obj.get("metadata", {}).get("resourceVersion", version)
                if event["type"] != "BOOKMARK":
                    yield event["type"], obj
                if stop.is_set():
                    w.stop()  # type: ignore[no-untyped-call]
                    break

    def token(
        self, namespace: str, account: str, audience: str | None, seconds: int, pod: Mapping[str, Any]
    ) -> str:
        """A ServiceAccount token from the TokenRequest API, bound to the Pod (dies with it)."""
        spec: dict[str, Any] = {
            "expirationSeconds": max(seconds, 86400),  # nothing refreshes it here: make it last the day
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod["metadata"]["name"],
                "uid": pod["metadata"]["uid"],
            },
        }
        if audience:
            spec["audiences"] = [audience]
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec}
        sa = self.resource("v1", "ServiceAccount")
        result = sa.subresources["token"].create(body=body, name=account, namespace=namespace)
        return str(result.to_dict()["status"]["token"])
