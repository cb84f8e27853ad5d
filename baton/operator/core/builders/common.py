"""Labels, selectors and metadata shared by every object of one StreamApp."""

from __future__ import annotations

from typing import Any

from baton.control.messages import Color
from baton.operator.core.constants import API_VERSION, KIND, LABEL_APP, LABEL_COLOR
from baton.operator.core.spec import StreamApp


def selector_labels(app: StreamApp, color: Color) -> dict[str, str]:
    """The labels a color's StatefulSet selects its Pods by (immutable once created)."""
    return {LABEL_APP: app.name, LABEL_COLOR: color}


def selector_string(app: StreamApp, color: Color) -> str:
    """The same selector as a string, for the scale subresource's status.selector."""
    return ",".join(f"{k}={v}" for k, v in selector_labels(app, color).items())


def common_labels(app: StreamApp, color: Color | None = None) -> dict[str, str]:
    """Recommended app.kubernetes.io labels plus Baton's own, on every object."""
    labels = {
        "app.kubernetes.io/name": "baton-streamapp",
        "app.kubernetes.io/instance": app.name,
        "app.kubernetes.io/component": "worker",
        "app.kubernetes.io/managed-by": "baton-operator",
        LABEL_APP: app.name,
    }
    if color is not None:
        labels[LABEL_COLOR] = color
    return labels


def owner_reference(app: StreamApp) -> dict[str, Any]:
    """Makes kube-controller-manager's garbage collector delete the object with the app."""
    assert app.uid is not None, "only an applied StreamApp can own objects"
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "name": app.name,
        "uid": app.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def metadata(app: StreamApp, name: str, color: Color | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": app.namespace, "labels": common_labels(app, color)}
    if app.uid is not None:  # unknown when rendering a file that was never applied
        meta["ownerReferences"] = [owner_reference(app)]
    return meta


def color_name(app: StreamApp, color: Color) -> str:
    """`<name>-<color>`: StatefulSet, headless Service and PDB of one color share it."""
    return f"{app.name}-{color}"


def service_account_name(app: StreamApp) -> str:
    """The account the workers run as: ``podTemplate.serviceAccount.name``, or the operator's."""
    return app.spec.pod_template.service_account.name or f"{app.name}-worker"
