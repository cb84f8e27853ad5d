"""Where each volume of a Pod lives on the local disk (pure: paths only, no I/O).

Layout under ``<run>/podrunner/`` (``~/.cache/baton/run/podrunner/``)::

    <namespace>/pvc/<claim>/               one per PersistentVolumeClaim: outlives its Pods,
                                            like a real PV, so state survives a Pod delete
    <namespace>/<pod>/<container>.log      each container's stdout and stderr, appended
    <namespace>/<pod>/volumes/<volume>/    emptyDir, secret, configMap, projected: per Pod,
                                            wiped when a new Pod (new uid) takes the name

``hostPath`` volumes are the host path itself: this *is* the host.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Layout:
    root: Path

    def claim_dir(self, namespace: str, claim: str) -> Path:
        return self.root / namespace / "pvc" / claim

    def claim_marker(self, namespace: str, claim: str) -> Path:
        """Holds the uid of the claim the directory belongs to: a new claim of that name starts empty."""
        return self.root / namespace / "pvc" / f".{claim}.uid"

    def pod_dir(self, namespace: str, pod: str) -> Path:
        return self.root / namespace / pod

    def pod_volumes(self, namespace: str, pod: str) -> Path:
        return self.pod_dir(namespace, pod) / "volumes"

    def log_file(self, namespace: str, pod: str, container: str) -> Path:
        return self.pod_dir(namespace, pod) / f"{container}.log"


def claim_names(pod: Mapping[str, Any]) -> list[str]:
    """The PersistentVolumeClaims a Pod mounts."""
    return [
        v["persistentVolumeClaim"]["claimName"]
        for v in pod["spec"].get("volumes") or []
        if "persistentVolumeClaim" in v
    ]


def volume_dirs(pod: Mapping[str, Any], layout: Layout) -> dict[str, Path]:
    """Pod volume name -> local directory."""
    ns, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
    out: dict[str, Path] = {}
    for vol in pod["spec"].get("volumes") or []:
        if "persistentVolumeClaim" in vol:
            out[vol["name"]] = layout.claim_dir(ns, vol["persistentVolumeClaim"]["claimName"])
        elif "hostPath" in vol:
            out[vol["name"]] = Path(vol["hostPath"]["path"])
        else:
            out[vol["name"]] = layout.pod_volumes(ns, name) / vol["name"]
    return out


def mounts(container: Mapping[str, Any], dirs: Mapping[str, Path]) -> dict[str, Path]:
    """The container's mountPath -> local directory (``subPath`` included)."""
    out: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        if mount["name"] not in dirs:
            continue
        local = dirs[mount["name"]]
        if mount.get("subPath"):
            local = local / mount["subPath"]
        out[mount["mountPath"]] = local
    return out
