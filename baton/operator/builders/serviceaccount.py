"""The workers' ServiceAccount: an identity with no API access (token not even mounted)."""

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
