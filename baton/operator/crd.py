"""The operator keeps the StreamApp CRD at its own version (``baton operator --manage-crd``).

Helm installs a chart's ``crds/`` once and never upgrades them, so a ``helm upgrade`` would
run a new operator against the old schema. As the Flink Kubernetes operator and Strimzi
document for their CRDs, the fix is to apply the new CRD with the upgrade; here the leader
does it at start, with the CRD its package carries: when the cluster's is older than the
operator (its ``baton.dev/version`` annotation) or unmarked (installed before the annotation),
it is server-side applied. A newer CRD is left alone: a rollback of the operator must not
take fields away from StreamApps a newer Baton wrote (the older operator then reports fields
it does not know, see ``core/spec.py``). The operator needs ``get`` and ``patch`` on this one CRD
(by name), never ``create``: the chart installs it the first time.
"""

from __future__ import annotations

import logging
from importlib import resources
from typing import Any, Literal

import yaml
from packaging.version import InvalidVersion, Version

from baton import __version__
from baton.operator.core.rbac import CRD_NAME
from baton.operator.kube import Kube

log = logging.getLogger("baton.operator")

CRD_API_VERSION = "apiextensions.k8s.io/v1"
VERSION_ANNOTATION = "baton.dev/version"

Decision = Literal["apply", "current", "newer", "missing"]


def bundled() -> dict[str, Any]:
    """The CRD of this operator's version (docs/gen_reference.py copies crds/ into the package)."""
    text = resources.files("baton.operator").joinpath(f"{CRD_NAME}.yaml").read_text()
    crd: dict[str, Any] = yaml.safe_load(text)
    return crd


def version_of(crd: dict[str, Any]) -> Version | None:
    raw = ((crd.get("metadata") or {}).get("annotations") or {}).get(VERSION_ANNOTATION)
    try:
        return Version(str(raw)) if raw else None
    except InvalidVersion:
        return None


def decide(installed: dict[str, Any] | None, own: dict[str, Any]) -> Decision:
    """What to do with the cluster's CRD, given this operator's (pure)."""
    if installed is None:
        return "missing"
    theirs, ours = version_of(installed), version_of(own)
    if ours is None:
        raise ValueError(f"the bundled CRD has no {VERSION_ANNOTATION} annotation")
    if theirs is None or theirs < ours:
        return "apply"
    return "newer" if theirs > ours else "current"


def ensure(kube: Kube) -> Decision:
    """Bring the cluster's CRD to this operator's version if it is older; log what was done."""
    own = bundled()
    installed = kube.read(CRD_API_VERSION, "CustomResourceDefinition", CRD_NAME, "")
    decision = decide(installed, own)
    theirs = version_of(installed or {})
    if decision == "apply":
        kube.apply(own)
        log.info("CRD %s upgraded from %s to %s", CRD_NAME, theirs or "an unmarked version", __version__)
    elif decision == "newer":
        log.warning(
            "CRD %s is at %s, newer than this operator (%s): left as it is", CRD_NAME, theirs, __version__
        )
    elif decision == "missing":
        log.error(
            "CRD %s is not installed: install the chart, or `kubectl apply --server-side -f crds/`", CRD_NAME
        )
    else:
        log.info("CRD %s is at this operator's version %s", CRD_NAME, __version__)
    return decision
