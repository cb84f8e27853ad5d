"""A PersistentVolume per claim, so claims become Bound as on a cluster with a provisioner.

There is no storage provisioner here. For each claim a selected Pod mounts, the runner
creates a ``hostPath`` PersistentVolume pre-bound to that claim (``claimRef`` with its uid)
and pointing at the claim's local directory; kube-controller-manager's PV controller then
binds the pair, so the StatefulSet controller and the operator see ``Bound`` claims. A PV
whose claim is gone (``Released``) is deleted with its directory, like a provisioner's
``Delete`` policy.

The directory is keyed by namespace and claim name and remembers the claim's uid: a Pod
recreated by its StatefulSet finds the old data, a *new* claim of the same name starts empty.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

from batondev.podrunner.kubeapi import Api
from batondev.podrunner.node import LABEL
from batondev.podrunner.volumes import Layout


def pv_name(namespace: str, claim: str, uid: str) -> str:
    """DNS-1123, unique per claim object, readable."""
    base = f"podrunner-{namespace}-{claim}"[:200].rstrip("-.")
    return f"{base}-{hashlib.sha256(uid.encode()).hexdigest()[:8]}"


def pv_object(claim: dict[str, Any], node: str, path: str) -> dict[str, Any]:
    meta, spec = claim["metadata"], claim["spec"]
    size = ((spec.get("resources") or {}).get("requests") or {}).get("storage", "1Gi")
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name(meta["namespace"], meta["name"], meta["uid"]), "labels": {LABEL: node}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "volumeMode": spec.get("volumeMode") or "Filesystem",
            "storageClassName": spec.get("storageClassName") or "",
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": path, "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                }
            },
        },
    }


def prepare_dir(layout: Layout, namespace: str, claim: str, uid: str) -> None:
    """Create the claim's directory; empty it first if it belonged to an older claim of that name."""
    directory, marker = layout.claim_dir(namespace, claim), layout.claim_marker(namespace, claim)
    try:
        owner = marker.read_text().strip()
    except FileNotFoundError:
        owner = uid
    if owner != uid and directory.exists():
        shutil.rmtree(directory)
    directory.mkdir(parents=True, exist_ok=True)
    marker.write_text(uid)


def ensure_bound(api: Api, layout: Layout, namespace: str, claim: str, node: str) -> bool:
    """True once the claim is Bound; creates its PV (and directory) on the way."""
    pvc = api.get("v1", "PersistentVolumeClaim", claim, namespace)
    if pvc is None:
        return False
    uid = pvc["metadata"]["uid"]
    prepare_dir(layout, namespace, claim, uid)
    if (pvc.get("status") or {}).get("phase") == "Bound":
        return True
    if not pvc["spec"].get("volumeName"):
        api.create("v1", "PersistentVolume", pv_object(pvc, node, str(layout.claim_dir(namespace, claim))))
    return False


def reap_released(api: Api, layout: Layout) -> int:
    """Delete every pod runner PV whose claim was deleted, and its directory (a ``Delete`` policy).

    Any runner reaps any runner's PVs (they share the label): a test's runner usually stops
    before its namespace, and so its claims, are deleted.
    """
    count = 0
    for pv in api.list_objects("v1", "PersistentVolume", label_selector=LABEL):
        if (pv.get("status") or {}).get("phase") not in ("Released", "Failed"):
            continue
        api.delete("v1", "PersistentVolume", pv["metadata"]["name"])
        directory = Path(((pv.get("spec") or {}).get("hostPath") or {}).get("path", "/"))
        if directory.is_relative_to(layout.root) and directory != layout.root:
            shutil.rmtree(directory, ignore_errors=True)
        count += 1
    return count
