"""The workers' ServiceAccount: no API access and no token mounted, except that under
``spec.rack`` it may ``get`` Nodes (builders/rack.py: a ClusterRoleBinding, and a projected
token in the Pods)."""

from __future__ import annotations

from typing import Any

from baton.operator.core.builders.common import metadata, service_account_name
from baton.operator.core.spec import StreamApp


def service_account(app: StreamApp) -> dict[str, Any] | None:
    """The operator's account for the workers, with ``podTemplate.serviceAccount``'s annotations
    and labels (cloud identities: IRSA, Workload Identity); None when the Pods run as an account
    the user names, which the operator neither makes nor changes."""
    template = app.spec.pod_template.service_account
    if template.name:
        return None
    meta = metadata(app, service_account_name(app))
    meta["labels"] = {**template.labels, **meta["labels"]}
    if template.annotations:
        meta["annotations"] = dict(template.annotations)
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": meta,
        "automountServiceAccountToken": False,
    }
