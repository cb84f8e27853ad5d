"""Everything the operator applies for one StreamApp, in apply order."""

from __future__ import annotations

from typing import Any

from baton.operator.builders.pdb import pod_disruption_budget
from baton.operator.builders.service import headless_service
from baton.operator.builders.serviceaccount import service_account
from baton.operator.builders.statefulset import statefulset
from baton.operator.spec import StreamApp


def desired_objects(app: StreamApp) -> list[dict[str, Any]]:
    """ServiceAccount first (Pods need it), then per color: Service, PDB, StatefulSet."""
    objects: list[dict[str, Any]] = [service_account(app)]
    for color in app.colors:
        objects += [headless_service(app, color), pod_disruption_budget(app, color), statefulset(app, color)]
    return objects
