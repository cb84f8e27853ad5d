"""The kopf peering object that operator replicas elect a leader through.

kopf needs the object to exist before it can record its replicas in it; creating it at start
keeps installation to "apply the CRDs, run the operator". Its CRDs ship in
``baton/operator/manifests/peering-crds.yaml`` (the Helm chart installs them).
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path

import click
from kubernetes.dynamic.exceptions import ConflictError, NotFoundError, ResourceNotFoundError

from baton.operator.kube import Kube

PEERING_CRDS = Path(__file__).parent / "manifests" / "peering-crds.yaml"


def ensure(kube: Kube, name: str, namespaces: Sequence[str]) -> None:
    """Create the (Cluster)KopfPeering ``name`` unless it exists; fail clearly without its CRD."""
    kind = "KopfPeering" if namespaces else "ClusterKopfPeering"
    try:
        resource = kube.dynamic.resources.get(api_version="kopf.dev/v1", kind=kind)
    except ResourceNotFoundError as exc:
        raise click.ClickException(
            f"the kopf.dev/v1 {kind} CRD is missing: kubectl apply -f {PEERING_CRDS} "
            "(or run with --standalone)"
        ) from exc
    targets: list[str | None] = list(namespaces) or [None]
    for namespace in targets:
        meta: dict[str, str] = {"name": name}
        if namespace is not None:
            meta["namespace"] = namespace
        with contextlib.suppress(NotFoundError):
            resource.get(name=name, namespace=namespace)
            continue  # pre-created (by the Helm chart): no create permission needed
        with contextlib.suppress(ConflictError):  # created by another replica meanwhile
            resource.create(
                body={"apiVersion": "kopf.dev/v1", "kind": kind, "metadata": meta}, namespace=namespace
            )
