"""The workers' ServiceAccount: no API access and no token mounted, except that under
``spec.rack`` it may ``get`` Nodes (builders/rack.py: a ClusterRoleBinding, and a projected
token in the Pods)."""

from __future__ import annotations

from typing import Any

from baton.operator.builders.common import metadata, service_account_name
from baton.operator.spec import StreamApp


def service_account(app: StreamApp) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": metadata(app, service_account_name(app)),
        "automountServiceAccountToken": False,
    }
