"""Zone awareness (``spec.rack``, Strimzi's rack): what a worker needs to read its Node's label.

The downward API gives a container its Node's name but not the Node's labels, so, as Strimzi
does for ``client.rack``, each worker reads its Node through the Kubernetes API at start
(``baton/worker/zone.py``). For that a zone-aware app's Pods get:

* the Node's name (``spec.nodeName``) and the label to read, as worker settings;
* a ServiceAccount token, in a projected volume at the standard path (token, the cluster's CA
  and the namespace, as the kubelet's own ``kube-api-access`` volume), while the
  ServiceAccount and the Pod keep ``automountServiceAccountToken: false``: Pods of apps
  without ``spec.rack`` hold no token at all;
* a ClusterRoleBinding of the app's ServiceAccount to the node-reader ClusterRole (``get`` on
  ``nodes``; the chart ships it, ``baton render --rbac`` prints it). Nodes are cluster-scoped,
  so no RoleBinding can grant them, and a namespaced StreamApp cannot own a cluster-scoped
  object: the binding carries the app's name and namespace as labels, and the operator deletes
  it by them when the app is deleted or stops needing it.
"""

from __future__ import annotations

from typing import Any

from baton.operator.core.builders.common import common_labels, service_account_name
from baton.operator.core.constants import LABEL_APP, LABEL_NAMESPACE
from baton.operator.core.spec import StreamApp
from baton.worker.config import env_var

# The node-reader ClusterRole's name when the operator is not told another (--node-reader-role):
# what `baton render --rbac` creates; the chart names it after its release.
DEFAULT_NODE_READER_ROLE = "baton-operator-node-reader"
API_ACCESS_VOLUME = "kube-api-access"
API_ACCESS_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"
# The token is read once, when the worker starts; the kubelet renews it at 80 % of its life.
TOKEN_SECONDS = 3600


def zone_aware(app: StreamApp) -> bool:
    return app.spec.rack is not None


def rack_env(app: StreamApp) -> list[dict[str, Any]]:
    """The worker settings that make it read its zone from its Node (none without spec.rack)."""
    if app.spec.rack is None:
        return []
    return [
        {"name": env_var("node_name"), "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        {"name": env_var("zone_node_label"), "value": app.spec.rack.topology_key},
    ]


def api_access(app: StreamApp) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(volumes, mounts): the projected ServiceAccount token of a zone-aware app's Pods."""
    if app.spec.rack is None:
        return [], []
    volume = {
        "name": API_ACCESS_VOLUME,
        "projected": {
            "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": TOKEN_SECONDS}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {
                    "downwardAPI": {
                        "items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]
                    }
                },
            ],
        },
    }
    mount = {"name": API_ACCESS_VOLUME, "mountPath": API_ACCESS_PATH, "readOnly": True}
    return [volume], [mount]


def binding_name(app: StreamApp) -> str:
    """``baton-worker-nodes.<namespace>.<name>``: cluster-wide unique (a namespace has no dots)."""
    return f"baton-worker-nodes.{app.namespace}.{app.name}"


def binding_labels(app: StreamApp) -> dict[str, str]:
    """What the operator finds an app's ClusterRoleBinding by (no owner reference can)."""
    return {**common_labels(app), LABEL_NAMESPACE: app.namespace}


def binding_selector(namespace: str, name: str) -> str:
    return f"{LABEL_APP}={name},{LABEL_NAMESPACE}={namespace}"


def node_reader_binding(app: StreamApp, role: str = DEFAULT_NODE_READER_ROLE) -> dict[str, Any]:
    """Lets the app's workers ``get`` Nodes (the ClusterRole ``role``), for zone awareness."""
    rbac = "rbac.authorization.k8s.io"
    return {
        "apiVersion": f"{rbac}/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": binding_name(app), "labels": binding_labels(app)},
        "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": role},
        "subjects": [
            {"kind": "ServiceAccount", "name": service_account_name(app), "namespace": app.namespace}
        ],
    }
