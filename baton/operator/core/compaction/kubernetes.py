"""``runner: Kubernetes``: the CronJob's Pod is the Spark driver, Spark's Kubernetes scheduler
starts the executors as Pods from the compactor image.

This is how most teams run Spark on Kubernetes without an operator: client mode, the
master ``k8s://https://kubernetes.default.svc``, executors owned by the driver Pod (so
the garbage collector removes them with the Job), the job's size in
``spec.compaction.spark`` (``executorInstances``, 2 if unset; ``executorCores``,
``executorMemory``).

Decisions:

* The driver runs as a ServiceAccount the platform team gives Spark in the app's
  namespace (``spec.compaction.kubernetes.serviceAccount``, ``spark`` if unset), with a
  Role that may create and delete Pods and ConfigMaps (docs/compaction.md has one). The
  operator never holds the right to create Pods, so it cannot grant it; it binds the
  compactor's status Role to that account, as it does for the Spark Operator's driver.
* Executors run where the Job may run and as it runs: the app's nodeSelector,
  tolerations, priority class and pull secrets, the image's user and group, a read-only
  root with ``/tmp`` on an emptyDir, and the volumes executors read or write (the Kafka CA,
  the snapshot claim). Spark takes those from a pod template file; the operator renders
  the template into the driver's environment and the driver writes it out at start
  (``baton/compactor/session.py``'s ``driver_settings``), so no ConfigMap has to be kept in step with the CronJob.
* The Kafka connector and S3A jars are on the executors' class path because the image puts
  them there (``spark-defaults.conf``), not because the driver ships them.
"""

from __future__ import annotations

import json
from typing import Any

from baton.images import container_security_context, pod_security_context

MASTER = "k8s://https://kubernetes.default.svc"
DEFAULT_SERVICE_ACCOUNT = "spark"
DEFAULT_EXECUTORS = 2
EXECUTOR_CONTAINER = "executor"
LOCAL_DIR = "spark-local-dir-1"
# the driver Pod's variables: rendered here, read by the compactor at start (baton/compactor/session.py)
POD_NAME_VAR = "BATON_POD_NAME"
POD_NAMESPACE_VAR = "BATON_POD_NAMESPACE"
EXECUTOR_TEMPLATE_VAR = "BATON_EXECUTOR_POD_TEMPLATE"


def service_account(compaction: dict[str, Any]) -> str:
    return str((compaction.get("kubernetes") or {}).get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT)


def spark_settings(image: str, pull_policy: str, spark: dict[str, Any]) -> dict[str, str]:
    """What the CronJob passes the driver as ``--conf`` besides ``spec.compaction.spark`` (pure)."""
    out = {
        "spark.kubernetes.container.image": image,
        "spark.kubernetes.container.image.pullPolicy": pull_policy,
        "spark.kubernetes.executor.podTemplateContainerName": EXECUTOR_CONTAINER,
    }
    if spark.get("executorInstances") is None:
        out["spark.executor.instances"] = str(DEFAULT_EXECUTORS)
    return out


def local_dir(
    volumes: list[dict[str, Any]], mounts: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The writable ``/tmp`` volume renamed ``spark-local-dir-1`` (pure).

    Spark takes a template's volumes of that name as a Pod's local storage, instead of adding
    an emptyDir of its own at the same path (the image's ``SPARK_LOCAL_DIRS``), which the API
    server refuses."""
    return (
        [{**v, "name": LOCAL_DIR} if v["name"] == "tmp" else v for v in volumes],
        [{**m, "name": LOCAL_DIR} if m["name"] == "tmp" else m for m in mounts],
    )


def executor_template(
    labels: dict[str, str],
    placement: dict[str, Any],
    volumes: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    *,
    container: str = EXECUTOR_CONTAINER,
) -> dict[str, Any]:
    """The executors' pod template: where and as whom they run, and what they mount (pure).

    ``container`` is the name Spark is told to look for (``podTemplateContainerName``): this
    runner sets it, the Spark Operator sets its own.

    The writable ``/tmp`` is Spark's local directory (:func:`local_dir`).
    """
    volumes, mounts = local_dir(volumes, mounts)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"labels": {**labels, "app.kubernetes.io/component": "compactor-executor"}},
        "spec": {
            "securityContext": pod_security_context(),
            "automountServiceAccountToken": False,  # executors never call the API server
            "containers": [
                {
                    "name": container,
                    "env": [{"name": "HOME", "value": "/tmp"}],
                    "securityContext": container_security_context(),
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
            **placement,
        },
    }


def driver_env(template: dict[str, Any]) -> list[dict[str, Any]]:
    """The driver container's variables, which ``baton/compactor/session.py``'s ``driver_settings`` reads (pure)."""
    return [
        {"name": POD_NAME_VAR, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": POD_NAMESPACE_VAR, "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": EXECUTOR_TEMPLATE_VAR, "value": json.dumps(template, sort_keys=True)},
    ]
