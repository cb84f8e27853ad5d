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
``/opt/baton/compact.py`` in the compactor image (a link to ``baton/compactor/cli.py``,
which runs as a spark-submit script). The Kafka connector and S3A jars are on the driver's
and executors' class paths by the image's ``spark-defaults.conf``, so ``sparkConf`` does
not name them (a ``spark.*.extraClassPath`` there would replace the image's).
"""

from __future__ import annotations

import copy
from typing import Any

from baton.compactor.cronjob import (
    SPARK_SETTINGS,
    compactor_labels,
    compactor_metadata,
    driver_service_account,
    job_arguments,
    job_env,
    job_volumes,
)
from baton.images import container_security_context

API_VERSION = "sparkoperator.k8s.io/v1beta2"
KIND = "ScheduledSparkApplication"
MAIN_FILE = "local:///opt/baton/compact.py"
SPARK_VERSION = "4.0.0"  # the compactor image's pyspark
DEFAULT_EXECUTORS = 2
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
    roles: dict[str, dict[str, Any]] = {
        "driver": {"serviceAccount": driver_service_account(compaction)},
        "executor": {"instances": DEFAULT_EXECUTORS},
    }
    for field, (role_name, key) in _FIELDS.items():
        if spark.get(field) is not None:
            roles[role_name][key] = spark[field]
    for settings in roles.values():  # copies: a rendered manifest shares no objects (no YAML anchors)
        settings |= {
            "labels": dict(labels),
            "env": copy.deepcopy(env),
            "volumeMounts": copy.deepcopy(mounts),
            "securityContext": container_security_context(read_only_root=False),
        }
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
        "volumes": volumes,
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
