"""runner: Kubernetes (the CronJob's Pod drives, executors are Pods) and the image's entry point."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from baton.compactor.entrypoint import BACKEND, driver_command, executor_command
from baton.compactor.session import driver_settings
from baton.images import RUN_AS_USER
from baton.operator.core.compaction import kubernetes
from baton.operator.core.compaction.cronjob import DEFAULT_COMPACTOR_ROLE, compactor_identity, cronjob
from baton.operator.core.rbac import compactor_rules
from tests.support.compaction import streamapp

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "streams", "effect": "NoSchedule"}


def _app(**compaction: Any) -> dict[str, Any]:
    settings = {"enabled": True, "snapshotStore": "s3a://b/p", "runner": "Kubernetes", **compaction}
    return streamapp(settings, {"tolerations": [TOLERATION], "nodeSelector": {"pool": "streams"}})


def _pod(job: dict[str, Any] | None) -> dict[str, Any]:
    assert job is not None
    pod: dict[str, Any] = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pod


def test_the_driver_runs_as_sparks_account_with_the_cluster_as_master_and_two_executors() -> None:
    app = _app(image="reg/compactor:1", spark={"executorMemory": "1g"})
    pod = _pod(
        cronjob(
            app,
            extra_volumes=(
                [{"name": "kafka-ca", "secret": {"secretName": "ca"}}],
                [{"name": "kafka-ca", "mountPath": "/etc/kafka-ca", "readOnly": True}],
            ),
        )
    )
    assert pod["serviceAccountName"] == "spark"
    (container,) = pod["containers"]
    args = container["args"]
    assert args[args.index("--master") + 1] == "k8s://https://kubernetes.default.svc"
    confs = dict(a.split("=", 1) for a, flag in zip(args[1:], args, strict=False) if flag == "--conf")
    assert confs["spark.kubernetes.container.image"] == "reg/compactor:1"
    assert confs["spark.executor.instances"] == "2" and confs["spark.executor.memory"] == "1g"
    env = {e["name"]: e for e in container["env"]}
    assert env[kubernetes.POD_NAME_VAR]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
    template = json.loads(env[kubernetes.EXECUTOR_TEMPLATE_VAR]["value"])
    spec = template["spec"]
    # executors run where the Job runs, as the image's user, read-only, with the Kafka CA
    assert spec["tolerations"] == [TOLERATION] and spec["nodeSelector"] == {"pool": "streams"}
    assert (
        spec["securityContext"]["runAsUser"] == RUN_AS_USER and spec["automountServiceAccountToken"] is False
    )
    (executor,) = spec["containers"]
    assert executor["name"] == confs["spark.kubernetes.executor.podTemplateContainerName"]
    assert executor["securityContext"]["readOnlyRootFilesystem"] is True
    assert {m["mountPath"] for m in executor["volumeMounts"]} == {"/tmp", "/etc/kafka-ca"}
    # /tmp is the executors' Spark local storage (Spark would otherwise mount its own there)
    assert {v["name"] for v in spec["volumes"]} == {"spark-local-dir-1", "kafka-ca"}
    assert {m["name"] for m in executor["volumeMounts"]} == {"spark-local-dir-1", "kafka-ca"}
    # an explicit count and account win
    other = _pod(cronjob(_app(spark={"executorInstances": 5}, kubernetes={"serviceAccount": "etl"})))
    assert other["serviceAccountName"] == "etl"
    assert "spark.executor.instances=5" in other["containers"][0]["args"]
    assert "spark.executor.instances=2" not in other["containers"][0]["args"]


def test_sparks_account_may_write_the_apps_status_and_nothing_is_granted_to_create_pods() -> None:
    """Bound with the Job's account to the compactor ClusterRole (StreamApps' status only,
    operator/core/rbac.py compactor_rules): the operator grants nothing that creates Pods."""
    (binding,) = compactor_identity(_app(kubernetes={"serviceAccount": "etl"}))[1:]
    assert {s["name"] for s in binding["subjects"]} == {"clicks-compactor", "etl"}
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": DEFAULT_COMPACTOR_ROLE,
    }
    assert all("pods" not in rule["resources"] for rule in compactor_rules())


def test_the_driver_learns_its_pod_and_writes_the_executor_template_at_start(tmp_path: Path) -> None:
    env = {
        kubernetes.POD_NAME_VAR: "clicks-compactor-1-abc",
        kubernetes.POD_NAMESPACE_VAR: "ns",
        kubernetes.EXECUTOR_TEMPLATE_VAR: '{"kind": "Pod"}',
    }
    settings = driver_settings("k8s://https://kubernetes.default.svc", env, tmp_path)
    assert (
        settings["spark.kubernetes.driver.pod.name"] == "clicks-compactor-1-abc"
    )  # executors are its children
    assert settings["spark.kubernetes.namespace"] == "ns"
    assert Path(settings["spark.kubernetes.executor.podTemplateFile"]).read_text() == '{"kind": "Pod"}'
    assert driver_settings("local[*]", env, tmp_path) == {}


def test_an_executor_pod_starts_sparks_backend_with_the_images_class_path() -> None:
    home = Path("/opt/baton/lib/python3.11/site-packages/pyspark")
    env = {
        "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.244.0.9:7078",
        "SPARK_EXECUTOR_ID": "2",
        "SPARK_EXECUTOR_CORES": "1",
        "SPARK_APPLICATION_ID": "spark-app-1",
        "SPARK_EXECUTOR_POD_IP": "10.244.0.12",
        "SPARK_EXECUTOR_POD_NAME": "baton-compact-exec-2",
        "SPARK_RESOURCE_PROFILE_ID": "0",
        "SPARK_EXECUTOR_MEMORY": "1024m",
        "SPARK_CLASSPATH": "/opt/baton/spark-jars/*:/opt/baton/s3a-jars/*",
        "SPARK_CONF_DIR": "/opt/spark/conf",
        "SPARK_JAVA_OPT_10": "-Dten",
        "SPARK_JAVA_OPT_2": "-Dtwo",
        "SPARK_JAVA_OPT_0": "-Dspark.driver.port=7078",
    }
    command = executor_command(env, home, "/opt/java/bin/java")
    assert command[:6] == [
        "/opt/java/bin/java",
        "-Dspark.driver.port=7078",
        "-Dtwo",
        "-Dten",
        "-Xms1024m",
        "-Xmx1024m",
    ]
    classpath = command[command.index("-cp") + 1].split(":")
    # the image's jars before pyspark's, as spark.executor.extraClassPath promises
    assert classpath == [
        "/opt/spark/conf",
        "/opt/baton/spark-jars/*",
        "/opt/baton/s3a-jars/*",
        f"{home}/jars/*",
    ]
    assert command[command.index("-cp") + 2] == BACKEND
    flags = dict(
        zip(command[command.index(BACKEND) + 1 :: 2], command[command.index(BACKEND) + 2 :: 2], strict=True)
    )
    assert flags == {
        "--driver-url": env["SPARK_DRIVER_URL"],
        "--executor-id": "2",
        "--cores": "1",
        "--app-id": "spark-app-1",
        "--hostname": "10.244.0.12",
        "--resourceProfileId": "0",
        "--podName": "baton-compact-exec-2",
    }
    with pytest.raises(SystemExit, match="SPARK_DRIVER_URL, SPARK_EXECUTOR_ID"):
        executor_command({"SPARK_EXECUTOR_CORES": "1", "SPARK_APPLICATION_ID": "a"}, home, "java")


def test_a_cluster_mode_driver_pod_runs_spark_submit_in_client_mode() -> None:
    home = Path("/p")
    command = driver_command(
        ["--properties-file", "/opt/spark/conf/spark.properties", "local:///x.py"],
        {"SPARK_DRIVER_BIND_ADDRESS": "10.0.0.5"},
        home,
    )
    assert command[0] == "/p/bin/spark-submit"
    assert command[command.index("--deploy-mode") + 1] == "client"
    assert "spark.driver.bindAddress=10.0.0.5" in command and command[-1] == "local:///x.py"


def test_a_driver_pod_gets_the_images_class_paths_unless_the_submitter_sent_some() -> None:
    """Spark points the driver Pod's SPARK_CONF_DIR at the submitted properties, so the image's
    spark-defaults.conf is not read there: its class paths are passed on, the submitter's win."""
    home = Path("/p")
    image = {"spark.driver.extraClassPath": "/jars/*", "spark.executor.extraClassPath": "/jars/*"}
    args = ["--properties-file", "/opt/spark/conf/spark.properties", "local:///x.py"]
    command = driver_command(args, {}, home, image, {"spark.app.name": "x"})
    assert (
        "spark.driver.extraClassPath=/jars/*" in command
        and "spark.executor.extraClassPath=/jars/*" in command
    )
    assert command.index("spark.driver.extraClassPath=/jars/*") < command.index("--deploy-mode")
    mine = driver_command(args, {}, home, image, {"spark.executor.extraClassPath": "/mine/*"})
    assert "spark.driver.extraClassPath=/jars/*" in mine
    assert not any(c.startswith("spark.executor.extraClassPath") for c in mine)
    assert not any("extraClassPath" in c for c in driver_command(args, {}, home))
