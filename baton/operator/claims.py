"""Which workers' state claims are smaller than ``spec.state.size``.

No I/O, but it compares sizes with the Kubernetes client's quantity parser, so it is not in
``core/``, which imports no client library.

A StatefulSet's claim templates never change, so a larger ``spec.state.size`` reaches the
claims that already exist only by expanding each of them, as Strimzi does for its brokers'
volumes: the operator raises ``spec.resources.requests.storage`` and the storage class's
resizer does the rest (a class without ``allowVolumeExpansion`` refuses, and the operator
says so in an Event). The CRD lets the size only grow.
"""

from __future__ import annotations

from typing import Any

from kubernetes.utils.quantity import parse_quantity


def undersized(claims: list[dict[str, Any]], size: str) -> list[str]:
    """Names of the claims that request less storage than ``size``."""
    want = parse_quantity(size)  # type: ignore[no-untyped-call]
    out = []
    for claim in claims:
        requested = ((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}
        have = parse_quantity(requested["storage"]) if "storage" in requested else None  # type: ignore[no-untyped-call]
        if have is not None and have < want:
            out.append(str(claim["metadata"]["name"]))
    return sorted(out)


def expansion(name: str, namespace: str, size: str) -> dict[str, Any]:
    """The server-side apply that asks for ``size``: the claim's storage request alone."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"resources": {"requests": {"storage": size}}},
    }
