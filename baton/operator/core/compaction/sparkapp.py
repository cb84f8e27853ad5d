"""The compactor as a ScheduledSparkApplication of the Kubeflow Spark Operator (pure, for the operator).

``spec.compaction.runner: SparkOperator`` hands scheduling and Spark's resources to the Spark
Operator instead of a CronJob whose Pod is the driver: the operator's
``ScheduledSparkApplication`` (``sparkoperator.k8s.io/v1beta2``) creates a
``SparkApplication`` per run, spark-submits it in cluster mode, and Spark's Kubernetes
backend starts the driver and ``executorInstances`` executor Pods from the compactor image.
Clusters that already run Spark this way get the compaction on their Spark nodes, their
queues and their Spark UI.

What stays the same as the CronJob: the schedule, ``Forbid`` concurrency, suspension during
flips, the arguments of ``baton compact``, the app's Kafka settings and object-store
credentials (on the driver, and on executors, which read Kafka and write the Parquet parts),
the snapshot claim and the Kafka CA volume (mounted in both), and the right to write this
app's ``status.compaction``.

The driver runs as the Spark ServiceAccount the Spark Operator's chart makes in each job
namespace (``sparkOperator.driverServiceAccount``, default ``spark-operator-spark``), which
may create executor Pods; the operator binds the compactor's status Role to it as well. So
Baton's operator needs no right to create Pods, and grants none.

What differs: the master is Kubernetes (``sparkMaster`` is not used); the entry point is
``/opt/baton/compact.py`` in the compactor image (which calls ``baton/compactor/cli.py``'s
``compact`` as a spark-submit script). The Kafka connector and S3A jars are on the driver's
and executors' class paths by the image's ``spark-defaults.conf``, so ``sparkConf`` does
not name them (a ``spark.*.extraClassPath`` there would replace the image's).
"""

from __future__ import annotations

import copy
from typing import Any

from baton.images import container_security_context, pod_security_context
from baton.operator.core.compaction.cronjob import (
    SPARK_SETTINGS,
    compactor_labels,
    compactor_metadata,
    driver_service_account,
    job_arguments,
    job_env,
    job_placement,
    job_volumes,
)
from baton.operator.core.compaction.kubernetes import executor_template, local_dir

API_VERSION = "sparkoperator.k8s.io/v1beta2"
KIND = "ScheduledSparkApplication"
MAIN_FILE = "local:///opt/baton/compact.py"
SPARK_VERSION = "4.0.0"  # the compactor image's pyspark
DEFAULT_EXECUTORS = 2
# the container names the Spark Operator tells Spark to take from the pod templates
DRIVER_CONTAINER = "spark-kubernetes-driver"
EXECUTOR_CONTAINER = "spark-kubernetes-executor"
# Spark settings the SparkApplication carries as fields of its own
_FIELDS = {
    "driverMemory": ("driver", "memory"),
    "driverCores": ("driver", "cores"),
    "executorMemory": ("executor", "memory"),
    "executorCores": ("executor", "cores"),
    "executorInstances": ("executor", "instances"),
}


def _conf(spark: dict[str, Any]) -> dict[str, str]:
    """sparkConf: ``spark.cores.max``, then the user's ``conf``."""
    out = {}
    if spark.get("maxCores") is not None:
        out[SPARK_SETTINGS["maxCores"]] = str(spark["maxCores"])
    return out | {k: str(v) for k, v in (spark.get("conf") or {}).items()}


def driver_template(
    labels: dict[str, str],
    placement: dict[str, Any],
    volumes: list[dict[str, Any]],
    mounts: list[dict[str, Any]],
    env: list[dict[str, Any]],
) -> dict[str, Any]:
    """The driver's pod template (pure): as the CronJob's Pod, where it may run, as whom, with
    the app's Kafka and object-store settings and the volumes it reads and writes.

    Templates rather than the SparkApplication's ``env``/``volumeMounts``/``securityContext``
    fields: the Spark Operator applies those through its mutating webhook, which a cluster
    may not run (and which sees every Pod of the namespace); a template is applied by Spark
    itself when it creates the Pod. The token stays mounted: the driver creates executors."""
    volumes, mounts = local_dir(volumes, mounts)
    return {
        "metadata": {"labels": {**labels, "app.kubernetes.io/component": "compactor-driver"}},
        "spec": {
            "securityContext": pod_security_context(),
            "containers": [
                {
                    "name": DRIVER_CONTAINER,
                    "env": env,
                    "securityContext": container_security_context(),
                    "volumeMounts": mounts,
                }
            ],
            "volumes": volumes,
            **placement,
        },
    }


def scheduled_spark_application(
    body: dict[str, Any],
    *,
    flip_in_progress: bool = False,
    extra_env: list[dict[str, Any]] | None = None,
    application_ids: list[str] | None = None,
    extra_volumes: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], []),
    default_image: str,
) -> dict[str, Any] | None:
    """The ScheduledSparkApplication, or None when compaction is off (same inputs as ``cronjob``)."""
    meta, spec = body["metadata"], body["spec"]
    compaction = spec.get("compaction") or {}
    if not compaction.get("enabled", False):
        return None
    spark = compaction.get("spark") or {}
    labels = compactor_labels(meta["name"])
    volumes, mounts = job_volumes(compaction, extra_volumes)
    env = [*job_env(body), *(extra_env or [])]
    placement = job_placement(body)
    # copies: a rendered manifest shares no objects (no YAML anchors)
    executor = executor_template(
        labels,
        copy.deepcopy(placement),
        copy.deepcopy(volumes),
        copy.deepcopy(mounts),
        container=EXECUTOR_CONTAINER,
    )
    executor["spec"]["containers"][0]["env"] += copy.deepcopy(env)
    for key in ("apiVersion", "kind"):  # a PodTemplateSpec here, not a Pod file
        executor.pop(key)
    roles: dict[str, dict[str, Any]] = {
        "driver": {
            "serviceAccount": driver_service_account(compaction),
            "template": driver_template(labels, placement, volumes, mounts, env),
        },
        "executor": {"instances": DEFAULT_EXECUTORS, "template": executor},
    }
    for field, (role_name, key) in _FIELDS.items():
        if spark.get(field) is not None:
            roles[role_name][key] = spark[field]
    template = {
        "type": "Python",
        "pythonVersion": "3",
        "mode": "cluster",
        "image": compaction.get("image") or default_image,
        "imagePullPolicy": spec.get("imagePullPolicy", "IfNotPresent"),
        "mainApplicationFile": MAIN_FILE,
        "arguments": job_arguments(body, application_ids),
        "sparkVersion": SPARK_VERSION,
        "sparkConf": _conf(spark),
        "restartPolicy": {"type": "Never"},
        **roles,
    }
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": compactor_metadata(body),
        "spec": {
            "schedule": compaction.get("schedule", "17 3 * * *"),
            "suspend": bool(compaction.get("suspend", False)) or flip_in_progress,
            "concurrencyPolicy": "Forbid",
            "successfulRunHistoryLimit": 3,
            "failedRunHistoryLimit": 3,
            "template": template,
        },
    }
