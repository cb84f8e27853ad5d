"""Names shared by the CRD, the builders, the handlers and the tests (one place to change them)."""

from __future__ import annotations

from typing import Final

GROUP: Final = "baton.dev"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "StreamApp"
PLURAL: Final = "streamapps"

# Every object the operator writes goes through server-side apply with this one manager, so
# `kubectl get -o yaml --show-managed-fields` tells which fields are the operator's.
FIELD_MANAGER: Final = "baton-operator"
# kopf keeps it on every StreamApp (its timers need one; DeleteTopics runs before removal).
FINALIZER: Final = "baton.dev/operator"

LABEL_APP: Final = "baton.dev/app"
LABEL_COLOR: Final = "baton.dev/color"
# On cluster-scoped objects of an app (its workers' ClusterRoleBinding), which no owner
# reference can tie to the namespaced StreamApp: with LABEL_APP, what they are found by.
LABEL_NAMESPACE: Final = "baton.dev/namespace"
ANNOTATION_SPEC_HASH: Final = "baton.dev/spec-hash"
# spec.restartNonce on the worker Pods: a new value is a new Pod template, so the Pods restart
# through the app's upgrade strategy (as the Flink Kubernetes operator's restartNonce)
ANNOTATION_RESTART_NONCE: Final = "baton.dev/restart-nonce"

# Inside the worker container.
STATE_DIR: Final = "/var/lib/baton"
KAFKA_SECRET_DIR: Final = "/etc/baton/kafka"
CONTAINER_NAME: Final = "worker"
METRICS_PORT_NAME: Final = "metrics"
