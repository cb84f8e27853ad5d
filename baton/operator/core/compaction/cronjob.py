"""The compactor's CronJob for one StreamApp, from the StreamApp object (pure, for the operator).

The operator calls ``cronjob(body, flip_in_progress=...)`` and applies the result (or
deletes the CronJob when it returns None). It takes plain dicts, not the operator's models:
it renders the spec as the CRD stores it, the same as ``sparkapp.py``.

Decisions:

* ``concurrencyPolicy: Forbid``: two runs would snapshot the same offsets twice and race
  on retention.
* suspended while a flip is in progress (and when ``spec.compaction.suspend``): a flip
  pauses both colors for two control-topic round trips; a compaction's broker load and
  its color comparison are pointless across that window.
* both colors' application ids are compacted in one run under BlueGreen, so the audit
  can compare blue with green at the same input position.
* the snapshot store is ``spec.compaction.snapshotStore`` (any Hadoop URI) or, with
  ``snapshotVolumeClaim``, a PVC mounted at ``/var/lib/baton-snapshots``; the workers
  must see the same store (``BATON_SNAPSHOT_STORE``) to restore from it.
* the Job runs as a ServiceAccount of its own, ``<name>-compactor``, whose Role allows only
  get and patch of this StreamApp's status: it writes the audit summary into
  ``status.compaction`` (baton/compactor/status.py). The workers' identity stays without
  any API access.
"""

from __future__ import annotations

from typing import Any

from baton import __version__
from baton.images import container_security_context, pod_security_context
from baton.operator.core.compaction.kubernetes import (
    MASTER,
    driver_env,
    executor_template,
    service_account,
    spark_settings,
)

# The Dockerfile's `compactor` target: the runtime plus a JRE, pyspark, the Kafka connector
# and the S3A jars. The app's image has no Java, so it cannot be the default; an image built
# FROM this one with the app's code also runs the recomputation audit (without the code the
# audit says it could not compare).
DEFAULT_IMAGE = f"ghcr.io/baton-dev/baton-compactor:{__version__}"
SNAPSHOT_MOUNT = "/var/lib/baton-snapshots"
CONTAINER = "compactor"


POD_IP_VAR = "BATON_POD_IP"
# spec.compaction.spark fields and the Spark settings they set
SPARK_SETTINGS = {
    "driverMemory": "spark.driver.memory",
    "driverCores": "spark.driver.cores",
    "executorMemory": "spark.executor.memory",
    "executorCores": "spark.executor.cores",
    "maxCores": "spark.cores.max",
    "executorInstances": "spark.executor.instances",
}


def spark_conf(spark: dict[str, Any]) -> dict[str, str]:
    """``spec.compaction.spark`` as Spark settings: the named fields, then ``conf`` (which cannot repeat them)."""
    out = {
        setting: str(spark[field])
        for field, setting in SPARK_SETTINGS.items()
        if spark.get(field) is not None
    }
    for key, value in (spark.get("conf") or {}).items():
        if key in out:
            raise ValueError(
                f"spec.compaction.spark.conf sets {key}, which a field of spec.compaction.spark sets"
            )
        out[key] = str(value)
    return out


def snapshot_store(compaction: dict[str, Any]) -> str:
    """``snapshotStore``, or the claim's mount path."""
    claim = compaction.get("snapshotVolumeClaim")
    store = compaction.get("snapshotStore") or (SNAPSHOT_MOUNT if claim else None)
    if store is None:
        raise ValueError("spec.compaction needs snapshotStore (a URI) or snapshotVolumeClaim (a PVC)")
    return str(store)


def job_arguments(body: dict[str, Any], application_ids: list[str] | None = None) -> list[str]:
    """``baton compact``'s options for the app (without the Spark settings, which differ by runner).

    ``application_ids``: the ids the colors run now; without them each color's first generation.
    """
    spec = body["spec"]
    compaction = spec.get("compaction") or {}
    app_id = spec.get("applicationId") or body["metadata"]["name"]
    strategy = (spec.get("upgrade") or {}).get("strategy", "BlueGreen")
    colors = ["blue"] if strategy == "Rolling" else ["blue", "green"]
    args = [
        "--snapshot-store",
        snapshot_store(compaction),
        "--keep",
        str(compaction.get("keep", 3)),
        "--topology",
        spec["topology"],
    ]
    if runner(compaction) == "CronJob":
        args += ["--master", compaction.get("sparkMaster", "local[*]")]
    elif runner(compaction) == "Kubernetes":
        args += ["--master", MASTER]
    for application_id in application_ids or [f"{app_id}-{color}" for color in colors]:
        args += ["--application-id", application_id]
    return args


def job_volumes(
    compaction: dict[str, Any], extra: tuple[list[dict[str, Any]], list[dict[str, Any]]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Pod volumes, container mounts) of the driver: a writable /tmp, the snapshot claim if
    any, then ``extra`` (the app's Kafka CA volume)."""
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    claim = compaction.get("snapshotVolumeClaim")
    if claim:
        volumes.append({"name": "snapshots", "persistentVolumeClaim": {"claimName": claim}})
        mounts.append({"name": "snapshots", "mountPath": SNAPSHOT_MOUNT})
    return volumes + extra[0], mounts + extra[1]


def job_env(body: dict[str, Any]) -> list[dict[str, Any]]:
    """What every runner's driver needs besides the app's Kafka and object-store settings."""
    meta, spec = body["metadata"], body["spec"]
    return [
        {"name": "BATON_BOOTSTRAP_SERVERS", "value": spec["kafka"]["bootstrapServers"]},
        {"name": "BATON_STREAMAPP", "value": f"{meta.get('namespace')}/{meta['name']}"},
        {"name": "HOME", "value": "/tmp"},
    ]


def job_placement(body: dict[str, Any]) -> dict[str, Any]:
    """Where the Job's Pod may run: the workers' nodeSelector, tolerations, priority class and
    image pull secrets from ``spec.podTemplate``.

    Why: the Job reads the same Kafka and writes beside the same state as the workers, so the
    nodes the app is allowed on are the nodes it is allowed on. A cluster that taints the
    nodes for stream apps would otherwise leave every compaction Pending. The workers'
    affinity is not copied: it spreads worker Pods, which says nothing about the Job."""
    template = body["spec"].get("podTemplate") or {}
    placement: dict[str, Any] = {}
    for field in ("nodeSelector", "tolerations", "priorityClassName", "imagePullSecrets"):
        if template.get(field):
            placement[field] = template[field]
    return placement


def runner(compaction: dict[str, Any]) -> str:
    """CronJob (the Pod is the whole job, or the driver of ``sparkMaster``'s cluster), Kubernetes
    (the Pod is the driver, executors are Pods: ``kubernetes.py``) or SparkOperator (a
    ScheduledSparkApplication: ``sparkapp.py``)."""
    return str(compaction.get("runner", "CronJob"))


def driver_service_account(compaction: dict[str, Any]) -> str:
    """The Spark ServiceAccount a SparkOperator run's driver uses (it creates the executors)."""
    return str((compaction.get("sparkOperator") or {}).get("driverServiceAccount", "spark-operator-spark"))


def spark_account(compaction: dict[str, Any]) -> tuple[str, str] | None:
    """The ServiceAccount a cluster runner's driver runs as, which someone else provides, and
    what to do when it is missing; None under runner CronJob (the operator makes its account)."""
    if not compaction.get("enabled", False):
        return None
    if runner(compaction) == "Kubernetes":
        return (
            service_account(compaction),
            "give the Spark driver a ServiceAccount that may create Pods "
            "(kubectl apply -n <namespace> -f examples/spark-service-account.yaml) "
            "or set spec.compaction.kubernetes.serviceAccount",
        )
    if runner(compaction) == "SparkOperator":
        return (
            driver_service_account(compaction),
            "install the Spark Operator with this namespace in its spark.jobNamespaces "
            "or set spec.compaction.sparkOperator.driverServiceAccount",
        )
    return None


def compactor_name(body: dict[str, Any]) -> str:
    """The name of the CronJob and of the Job's ServiceAccount, Role and RoleBinding."""
    return f"{body['metadata']['name']}-compactor"


def compactor_labels(name: str) -> dict[str, str]:
    # baton.dev/app is how the operator lists what an app owns, to prune it (operator/kube.py).
    return {
        "app.kubernetes.io/name": "baton-streamapp",
        "app.kubernetes.io/instance": name,
        "app.kubernetes.io/component": "compactor",
        "app.kubernetes.io/managed-by": "baton-operator",
        "baton.dev/app": name,
    }


def compactor_metadata(body: dict[str, Any]) -> dict[str, Any]:
    meta = body["metadata"]
    out: dict[str, Any] = {
        "name": compactor_name(body),
        "namespace": meta.get("namespace"),
        "labels": compactor_labels(meta["name"]),
    }
    if meta.get("uid"):
        out["ownerReferences"] = [
            {
                "apiVersion": body.get("apiVersion", "baton.dev/v1alpha1"),
                "kind": body.get("kind", "StreamApp"),
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
    return out


# The ClusterRole the Job's identity is bound to (get and patch of StreamApps' status): the
# operator's --compactor-role, made with the operator's RBAC (core/rbac.py, the chart).
DEFAULT_COMPACTOR_ROLE = "baton-operator-compactor"


def compactor_identity(body: dict[str, Any], role: str = DEFAULT_COMPACTOR_ROLE) -> list[dict[str, Any]]:
    """ServiceAccount and RoleBinding of the compactor Job: ``role`` (the status of the
    namespace's StreamApps) in the app's namespace. The operator writes no Role: it may only
    bind that ClusterRole (operator/core/rbac.py)."""
    compaction = body.get("spec", {}).get("compaction") or {}
    accounts = [compactor_name(body)]
    if runner(compaction) == "SparkOperator":  # the Spark driver writes the status then
        accounts.append(driver_service_account(compaction))
    elif runner(compaction) == "Kubernetes":  # the driver runs as the account that may create executors
        accounts.append(service_account(compaction))
    rbac = "rbac.authorization.k8s.io"
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": compactor_metadata(body)},
        {
            "apiVersion": f"{rbac}/v1",
            "kind": "RoleBinding",
            "metadata": compactor_metadata(body),
            "roleRef": {"apiGroup": rbac, "kind": "ClusterRole", "name": role},
            "subjects": [
                {"kind": "ServiceAccount", "name": account, "namespace": body["metadata"].get("namespace")}
                for account in accounts
            ],
        },
    ]


def cronjob(
    body: dict[str, Any],
    *,
    flip_in_progress: bool = False,
    extra_env: list[dict[str, Any]] | None = None,
    application_ids: list[str] | None = None,
    extra_volumes: tuple[list[dict[str, Any]], list[dict[str, Any]]] = ([], []),
    default_image: str = DEFAULT_IMAGE,
) -> dict[str, Any] | None:
    """The CronJob manifest, or None when ``spec.compaction.enabled`` is false.

    ``extra_env`` and ``extra_volumes`` (Pod volumes, container mounts) are how the app's
    Pods reach Kafka (SASL credentials, BATON_KAFKA_CONFIG, the CA certificate): the
    operator passes its workers' settings, so the Job connects as the app does.
    ``application_ids`` are the ids the colors run now (``<id>-<color>-g<N>`` after a
    Rebuild); the operator passes them from its deploy record. Without them, each color's
    first generation. It runs as :func:`compactor_identity`'s ServiceAccount, which the
    caller applies with it. ``default_image`` is the operator's compactor image, used unless
    ``spec.compaction.image`` names another."""
    meta, spec = body["metadata"], body["spec"]
    compaction = spec.get("compaction") or {}
    if not compaction.get("enabled", False):
        return None
    name = meta["name"]
    volumes, mounts = job_volumes(compaction, extra_volumes)
    args = ["compact", *job_arguments(body, application_ids)]
    for key, value in spark_conf(compaction.get("spark") or {}).items():
        args += ["--conf", f"{key}={value}"]
    env = [
        *job_env(body),
        # a cluster's executors connect back to the driver, which is this Pod
        {"name": POD_IP_VAR, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        *(extra_env or []),
    ]
    labels = compactor_labels(name)
    image, pull_policy = compaction.get("image") or default_image, spec.get("imagePullPolicy", "IfNotPresent")
    account = compactor_name(body)
    if runner(compaction) == "Kubernetes":
        account = service_account(compaction)
        for key, value in spark_settings(image, pull_policy, compaction.get("spark") or {}).items():
            args += ["--conf", f"{key}={value}"]
        template = executor_template(labels, job_placement(body), volumes, mounts)
        env += driver_env(template)
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["baton"],
        "args": args,
        "env": env,
        "securityContext": container_security_context(),
        "volumeMounts": mounts,
    }
    if compaction.get("resources"):
        container["resources"] = compaction["resources"]
    pod: dict[str, Any] = {
        "serviceAccountName": account,
        "restartPolicy": "Never",
        # as the workers: the image's user, and its group on the volumes, so the Kafka Secrets
        # the operator mounts (0440) and the snapshot claim are readable by the process
        "securityContext": pod_security_context(),
        "containers": [container],
        "volumes": volumes,
        **job_placement(body),
    }
    metadata = compactor_metadata(body)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": metadata,
        "spec": {
            "schedule": compaction.get("schedule", "17 3 * * *"),
            "suspend": bool(compaction.get("suspend", False)) or flip_in_progress,
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 600,
            "successfulJobsHistoryLimit": compaction.get("successfulJobsHistoryLimit", 3),
            "failedJobsHistoryLimit": compaction.get("failedJobsHistoryLimit", 3),
            "jobTemplate": {
                "metadata": {"labels": labels},
                "spec": {
                    "backoffLimit": 1,
                    "activeDeadlineSeconds": compaction.get("activeDeadlineSeconds", 6 * 3600),
                    "template": {"metadata": {"labels": labels}, "spec": pod},
                },
            },
        },
    }
