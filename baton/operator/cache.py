"""The operator's view of the objects it watches: fed by watch events and by its own writes.

Why: without it every app's pass read its StreamApp twice, both StatefulSets, every desired
object before applying it, and listed seven kinds to find what to prune (about 30 requests
per app per pass; ~500 requests/s at 500 apps). kopf already watches these kinds for the
operator (one watch stream per kind, not per app), so its events keep this store current,
and a pass reads from memory. The answers to the operator's own writes (apply, status) go
in too, so a pass never reads an older version of what it just wrote, in particular the
deploy record in the StreamApp's status.

Resource versions are compared as integers when both are (etcd's revisions, which every
API server in use hands out): a watch event that arrives after a write's answer must not
put the older object back. A miss is "unknown", not "absent": callers fall back to a GET,
because at start the watches have not listed everything yet.

StreamApps are the exception to "fed by watch events": only their deletions come from events;
their content comes from GETs (on every spec change, and when a promote or rollback
annotation appears) and from the operator's own writes. A watch opened before a CRD upgrade
delivers its next object pruned by the old schema (a field of the newer CRD silently gone),
and an operator acting on that would apply a spec it does not fully understand
(tests/integration/test_operator_newer_crd.py caught it).
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterable
from typing import Any

Key = tuple[str, str, str, str]  # (API group, kind, namespace, name)


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0]


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (
        _group(str(obj.get("apiVersion", ""))),
        str(obj.get("kind", "")),
        meta.get("namespace") or "",
        meta["name"],
    )


def _version(obj: dict[str, Any] | None) -> int | None:
    raw = ((obj or {}).get("metadata") or {}).get("resourceVersion")
    return int(raw) if isinstance(raw, str) and raw.isdigit() else None


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """Drop managedFields (half of a StatefulSet's size, and never read by the operator)."""
    out = copy.deepcopy(obj)
    (out.get("metadata") or {}).pop("managedFields", None)
    return out


class ObjectCache:
    """Thread-safe: kopf's event loop writes, reconciliation threads read and write."""

    def __init__(self, kinds: Iterable[tuple[str, str]]) -> None:
        self.kinds = frozenset((_group(v), k) for v, k in kinds)  # (group, kind) fed by watches
        self._objects: dict[Key, dict[str, Any]] = {}
        # the newest resourceVersion at which an object was seen deleted (a late event or an
        # apply answer older than the deletion must not bring it back)
        self._gone: dict[Key, int] = {}
        self._lock = threading.Lock()

    def covers(self, api_version: str, kind: str) -> bool:
        return (_group(api_version), kind) in self.kinds

    def observe(self, obj: dict[str, Any], deleted: bool = False) -> None:
        """A watch event's object, or the server's answer to a write; older versions lose."""
        if not obj.get("kind") or not (obj.get("metadata") or {}).get("name"):
            return
        key, version = key_of(obj), _version(obj)
        with self._lock:
            known = _version(self._objects.get(key))
            newer_than = max(v for v in (known, self._gone.get(key), -1) if v is not None)
            if version is not None and version < newer_than:
                return
            if deleted:
                self._objects.pop(key, None)
                if version is not None:
                    self._gone[key] = version
            else:
                self._objects[key] = _slim(obj)
                self._gone.pop(key, None)

    def forget(self, obj: dict[str, Any]) -> None:
        """The operator deleted it: not there any more as far as the next pass is concerned."""
        with self._lock:
            self._objects.pop(key_of(obj), None)

    def get(self, api_version: str, kind: str, name: str, namespace: str) -> dict[str, Any] | None:
        """A copy of the cached object, or None when this cache does not know it."""
        with self._lock:
            found = self._objects.get((_group(api_version), kind, namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def owned(self, uid: str, namespace: str) -> list[dict[str, Any]]:
        """Cached objects of ``namespace`` whose controller is the object with ``uid``."""
        with self._lock:
            items = [o for (_, _, ns, _), o in self._objects.items() if ns == namespace]
            return [
                copy.deepcopy(o)
                for o in items
                if any(
                    r.get("uid") == uid and r.get("controller")
                    for r in (o.get("metadata") or {}).get("ownerReferences") or []
                )
            ]

    def matching(
        self, api_version: str, kind: str, namespace: str, labels: dict[str, str]
    ) -> list[dict[str, Any]]:
        """Cached objects of a kind in ``namespace`` carrying every one of ``labels``."""
        group = _group(api_version)
        with self._lock:
            return [
                copy.deepcopy(o)
                for (g, k, ns, _), o in self._objects.items()
                if (g, k, ns) == (group, kind, namespace)
                and all(
                    ((o.get("metadata") or {}).get("labels") or {}).get(n) == v for n, v in labels.items()
                )
            ]

    def __len__(self) -> int:
        with self._lock:
            return len(self._objects)
