"""runner: SparkOperator renders a ScheduledSparkApplication that runs what the CronJob runs."""

from __future__ import annotations

from typing import Any

import pytest
from kubeflow_spark_api.models import SparkV1beta2ScheduledSparkApplication

from baton.operator.core.builders import desired_objects
from baton.operator.core.compaction.sparkapp import DRIVER_CONTAINER, EXECUTOR_CONTAINER, MAIN_FILE
from tests.support.samples import app

pytestmark = pytest.mark.unit

COMPACTION: dict[str, Any] = {
    "enabled": True,
    "snapshotStore": "s3a://snaps/prod",
    "objectStore": {"endpoint": "http://minio:9000", "credentialsSecret": {"name": "s3-keys"}},
    "spark": {
        "driverMemory": "1g",
        "executorMemory": "2g",
        "executorCores": 2,
        "executorInstances": 3,
        "maxCores": 6,
        "conf": {"spark.sql.shuffle.partitions": "12"},
    },
}


def _objects(**compaction: Any) -> dict[str, dict[str, Any]]:
    sample = app(
        kafka={
            "bootstrapServers": "k:9093",
            "securityProtocol": "SASL_SSL",
            "saslMechanism": "SCRAM-SHA-512",
            "secretRef": {"name": "kafka-creds"},
        },
        compaction={**COMPACTION, **compaction},
    )
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in desired_objects(sample)}


def test_the_spark_operator_runs_what_the_cronjob_runs() -> None:
    as_cronjob = _objects()
    objects = _objects(runner="SparkOperator")
    assert "CronJob/click-counter-compactor" not in objects
    ssa = objects["ScheduledSparkApplication/click-counter-compactor"]
    job = as_cronjob["CronJob/click-counter-compactor"]
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    template = ssa["spec"]["template"]
    # the same job: compact's arguments without the master (Kubernetes) and Spark's settings
    args = container["args"][1:]
    for option in ("--master", "--conf"):
        while option in args:
            i = args.index(option)
            del args[i : i + 2]
    assert template["arguments"] == args
    assert (template["type"], template["mode"], template["mainApplicationFile"]) == (
        "Python",
        "cluster",
        MAIN_FILE,
    )
    assert template["image"] == container["image"]
    # the same environment (Kafka SASL, the store, its keys) on the driver and the executors
    cron_env = [e for e in container["env"] if e["name"] != "BATON_POD_IP"]
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    for role, container_name in (("driver", DRIVER_CONTAINER), ("executor", EXECUTOR_CONTAINER)):
        spec = template[role]["template"]["spec"]
        (role_container,) = spec["containers"]
        assert role_container["name"] == container_name
        assert [e for e in role_container["env"] if e["name"] != "HOME"] == [
            e for e in cron_env if e["name"] != "HOME"
        ]
        # the same volumes, /tmp as Spark's local directory, and the same security settings
        assert [m["mountPath"] for m in role_container["volumeMounts"]] == [
            m["mountPath"] for m in container["volumeMounts"]
        ]
        assert [v["name"] for v in spec["volumes"]] == [
            "spark-local-dir-1" if v["name"] == "tmp" else v["name"] for v in pod["volumes"]
        ]
        assert role_container["securityContext"] == container["securityContext"]
        assert spec["securityContext"] == pod["securityContext"]
        # no field the operator's mutating webhook would have to apply
        assert not {"env", "volumeMounts", "securityContext", "tolerations"} & set(template[role])
    assert "volumes" not in template
    # Spark's resources are the SparkApplication's own fields; the jars are the image's (no class path)
    assert (template["driver"]["memory"], template["executor"]["memory"]) == ("1g", "2g")
    assert (template["executor"]["cores"], template["executor"]["instances"]) == (2, 3)
    assert template["sparkConf"] == {
        "spark.cores.max": "6",
        "spark.sql.shuffle.partitions": "12",
    }
    # scheduling as the CronJob's
    for key in ("schedule", "suspend", "concurrencyPolicy"):
        assert ssa["spec"][key] == job["spec"][key]
    assert ssa["metadata"]["ownerReferences"] == job["metadata"]["ownerReferences"]
    # the driver runs as the Spark ServiceAccount, which may also write this app's status
    assert template["driver"]["serviceAccount"] == "spark-operator-spark"
    binding = objects["RoleBinding/click-counter-compactor"]
    assert {s["name"] for s in binding["subjects"]} == {"click-counter-compactor", "spark-operator-spark"}
    assert {s["name"] for s in as_cronjob["RoleBinding/click-counter-compactor"]["subjects"]} == {
        "click-counter-compactor"
    }
    other = _objects(runner="SparkOperator", sparkOperator={"driverServiceAccount": "spark"})
    assert (
        other["ScheduledSparkApplication/click-counter-compactor"]["spec"]["template"]["driver"][
            "serviceAccount"
        ]
        == "spark"
    )


def test_the_rendered_object_is_what_the_spark_operators_api_describes() -> None:
    """Parsed by the upstream's published models (kubeflow-spark-api) and written back unchanged:
    no field is unknown to them (an unknown one would be dropped), every type is theirs."""
    ssa = _objects(runner="SparkOperator")["ScheduledSparkApplication/click-counter-compactor"]
    parsed = SparkV1beta2ScheduledSparkApplication.from_dict(ssa)
    assert parsed is not None
    assert parsed.to_dict() == ssa
    broken = {
        **ssa,
        "spec": {**ssa["spec"], "template": {**ssa["spec"]["template"], "mainAplicationFile": "x"}},
    }
    reparsed = SparkV1beta2ScheduledSparkApplication.from_dict(broken)
    assert reparsed is not None and reparsed.to_dict() != broken  # the check does bite


def test_runs_go_where_the_apps_pods_may_go() -> None:
    """The app's tolerations and nodeSelector reach the driver and the executors, by template."""
    toleration = {"key": "baton.dev/node", "operator": "Equal", "value": "local", "effect": "NoSchedule"}
    sample = app(
        compaction={**COMPACTION, "runner": "SparkOperator"},
        podTemplate={"tolerations": [toleration], "nodeSelector": {"pool": "stream"}},
    )
    (ssa,) = [o for o in desired_objects(sample) if o["kind"] == "ScheduledSparkApplication"]
    for role in ("driver", "executor"):
        spec = ssa["spec"]["template"][role]["template"]["spec"]
        assert spec["tolerations"] == [toleration] and spec["nodeSelector"] == {"pool": "stream"}
