"""The compactor as a deployed app uses it, under both cluster runners: a run on the stack's
node snapshots the changelogs into an object store (the stack's MinIO, credentials from a
Secret); a worker whose state volume is lost restores from that snapshot (the metric shows
how little it replayed) and counts stay exact.

Everything is the real thing. ``runner: Kubernetes``: the test creates a Job from the
operator's CronJob; its Pod is the Spark driver, and Spark's Kubernetes scheduler starts two
executor Pods from the compactor image, under the ServiceAccount of
examples/spark-service-account.yaml. ``runner: SparkOperator``: the Kubeflow Spark Operator,
built from its Go module and installed with its own chart, runs the operator's
ScheduledSparkApplication when its schedule comes (the test moves the StreamApp's schedule to
the coming minute, which also checks that a schedule change takes effect); its spark-submit
creates the driver Pod, which starts two executors. Under ``Kubernetes`` one executor Pod is
deleted while the job runs: Spark replaces it and the run completes whole; and the worker that
loses its volume restores from the snapshot. Both are Spark's and the worker's own, whoever
ran the compaction, so the ``SparkOperator`` run stops once its snapshots are in the bucket.
The workers' ``baton run`` (pyarrow's S3) runs from the runtime image; both images are built
from the Dockerfile (dev/image): the JRE, pyspark, the connector and S3A jars on the class
path are the image's own.
"""

from __future__ import annotations

import json
import threading
import time
import urllib.request
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import orjson
import pytest
from batondev import objectstore, spark_operator
from batondev.paths import REPO
from pyarrow import fs as pafs

from baton.operator.core.builders.statefulset import STATE_VOLUME
from baton.operator.core.compaction.cronjob import compactor_name
from baton.testing import produce, read_all, wait_for
from baton.worker.state.snapshot_fs import open_store
from baton.worker.state.snapshot_uri import S3Settings
from tests.conftest import Node
from tests.support.deploy import USERS, counts
from tests.support.operator import (
    KubectlFn,
    apply,
    example_manifest,
    get_json,
    install_crds,
    start_operator,
    try_get_json,
)

pytestmark = pytest.mark.e2e

APP = "click-counter"


class Clicks:
    """Clicks stamped now (old timestamps would roll changelog segments at once, and the log
    cleaner would compact away the history this test needs); remembers what it sent."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.sent: Counter[str] = Counter()

    def batch(self, n: int) -> None:
        users = [USERS[i % len(USERS)] for i in range(n)]
        self.sent.update(users)
        produce(
            self.bootstrap,
            self.topic,
            [(u.encode(), orjson.dumps({"user_id": u, "timestamp": int(time.time())})) for u in users],
        )


POD = f"{APP}-blue-0"
DRIVER_ACCOUNT = "spark-operator-spark"  # what spec.compaction.sparkOperator defaults to


def _restored_records(kubectl: KubectlFn, namespace: str) -> float:
    """``baton_restored_records`` summed over tasks and stores, scraped from the worker."""
    pod = get_json(kubectl, "pod", POD, "-n", namespace)
    port = next(p["containerPort"] for c in pod["spec"]["containers"] for p in c.get("ports", []))
    # the node's Pods are reachable from this machine at their own addresses (the CNI bridge)
    url = f"http://{pod['status']['podIP']}:{port}/metrics"
    body = urllib.request.urlopen(url, timeout=5).read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in body.splitlines()
        if line.startswith("baton_restored_records_total{")
    )


@pytest.mark.parametrize("runner", ["Kubernetes", "SparkOperator"])
def test_the_compaction_snapshots_and_a_worker_that_lost_its_volume_restores_from_it(  # noqa: PLR0917
    runner: str,
    node: Node,
    node_runtime_image: str,
    node_compactor_image: str,
    request: pytest.FixtureRequest,
    kube: Any,
    kubectl: KubectlFn,
    namespace: str,
    kafka_bootstrap: str,
    new_topic: Any,
    unique_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    install_crds(kubectl)
    node_spark_operator_image = (
        request.getfixturevalue("node_spark_operator_image") if runner == "SparkOperator" else ""
    )
    endpoint = objectstore.up()  # this machine's address of it; Pods use the node's
    clicks_topic, counts_topic = new_topic(partitions=2), new_topic(partitions=2)
    keys = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s3-keys", "namespace": namespace},
        "stringData": {"access-key": objectstore.ACCESS_KEY, "secret-key": objectstore.SECRET_KEY},
    }
    store = f"s3a://{objectstore.BUCKET}/{unique_name}"
    manifest = example_manifest(
        namespace,
        image=node_runtime_image,
        kafka={"bootstrapServers": node.kafka_bootstrap},
        applicationId=unique_name,
        replicas=1,
        standbyReplicas=0,
        resources={},
        state={"store": "rocksdb", "size": "256Mi"},
        upgrade={"strategy": "Rolling"},
        compaction={
            "enabled": True,
            "image": node_compactor_image,
            "snapshotStore": store,
            "objectStore": {
                "endpoint": objectstore.node_endpoint(),
                "credentialsSecret": {
                    "name": "s3-keys",
                    "accessKeyIdKey": "access-key",
                    "secretAccessKeyKey": "secret-key",
                },
            },
            # Kubernetes: runs when this test creates a Job from the CronJob; SparkOperator:
            # the ScheduledSparkApplication's next run is set to start in a minute or two
            "schedule": "0 0 1 1 *",
            "runner": runner,
            "spark": {
                "driverMemory": "512m",
                "executorMemory": "512m",
                # two executors on a two-core node: requests below a core each, so both fit
                "conf": {
                    "spark.sql.shuffle.partitions": "2",
                    "spark.kubernetes.executor.request.cores": "100m",
                },
            },
        },
        podTemplate={
            "env": [
                {"name": "CLICKS_TOPIC", "value": clicks_topic},
                {"name": "COUNTS_TOPIC", "value": counts_topic},
            ],
            "tolerations": [node.toleration],
        },
        # one changelog record per click, so the changelog is much longer than the state
        worker={"writeCache": False},
    )
    producer = Clicks(kafka_bootstrap, clicks_topic)
    release = f"spark-operator-{unique_name[-6:]}"
    if runner == "SparkOperator":  # installed as its users do: its own chart, this namespace its jobs'
        spark_operator.install(
            release, namespace, node_spark_operator_image, [node.toleration], driver_account=DRIVER_ACCOUNT
        )
    operator = start_operator(tmp_path, namespace, kube.kubeconfig, "operator")
    try:
        apply(kubectl, keys)
        if runner == "Kubernetes":
            # as the docs say: kubectl apply -n <namespace> -f examples/spark-service-account.yaml
            kubectl("apply", "-n", namespace, "-f", str(REPO / "examples" / "spark-service-account.yaml"))
        apply(kubectl, manifest)
        kubectl("wait", "--for=condition=Ready", f"sapp/{APP}", "-n", namespace, "--timeout=100s")
        producer.batch(600)
        wait_for("counts", lambda: counts(kafka_bootstrap, counts_topic) == dict(producer.sent), 60)
        changelog = f"{unique_name}-blue-user-counts-store-changelog"
        changelog_records = len(read_all(kafka_bootstrap, changelog))
        assert changelog_records >= 600, changelog_records

        # Spark replacing a lost executor is Spark's own, the same under either runner: seen once
        executors = Executors(kubectl, namespace, delete_one=runner == "Kubernetes")
        with executors:
            if runner == "Kubernetes":
                driver, account = _run_the_cronjob(kubectl, namespace), "spark"
            else:
                driver, account = _run_on_schedule(kubectl, namespace), DRIVER_ACCOUNT
        assert driver["spec"]["containers"][0]["image"] == node_compactor_image
        assert driver["spec"]["nodeName"] == node.name
        assert driver["spec"]["serviceAccountName"] == account
        # two executor Pods from the compactor image, children of the driver Pod; one deleted
        # mid-job and replaced, and the run still completed whole
        print(f"executors: {executors.seen}, deleted {executors.deleted}")
        if runner == "Kubernetes":
            assert executors.deleted is not None, "no two executors ran at once"
            assert len(executors.seen) >= 3, executors.seen
        else:
            assert len(executors.seen) >= 2, executors.seen
        for pod in executors.seen.values():
            assert pod["image"] == node_compactor_image and pod["node"] == node.name, pod
            assert pod["owner"] == [driver["metadata"]["name"]], pod
        (driver_status,) = driver["status"]["containerStatuses"]
        assert driver_status["containerID"].startswith("containerd://"), driver_status
        compaction = get_json(kubectl, "sapp", APP, "-n", namespace)["status"]["compaction"]
        assert compaction["liveKeys"] == len(producer.sent), compaction
        assert compaction["recordsRead"] == changelog_records and compaction["snapshotsWritten"] == 2
        assert compaction["findings"] == 0, compaction
        for var, value in objectstore.client_env().items():  # this process reads the bucket too
            monkeypatch.setenv(var, value)
        s3fs, prefix = open_store(store, S3Settings(endpoint))  # the objects are in the bucket
        names = [i.path for i in s3fs.get_file_info(pafs.FileSelector(prefix, recursive=True))]
        assert sum(n.endswith("/_baton.json") for n in names) == 2, names
        if runner == "SparkOperator":
            return  # a restore from a snapshot does not depend on who ran the compaction: seen once

        # the worker loses its state volume: a new claim of the same name starts empty
        kubectl("delete", "pvc", f"{STATE_VOLUME}-{POD}", "-n", namespace, "--wait=false")
        old_uid = get_json(kubectl, "pod", POD, "-n", namespace)["metadata"]["uid"]
        kubectl("delete", "pod", POD, "-n", namespace, "--wait=true", "--timeout=60s")
        # `kubectl wait` fails at once on a Pod the StatefulSet controller has not recreated yet
        wait_for(
            "the new Pod",
            lambda: (
                (try_get_json(kubectl, "pod", POD, "-n", namespace) or {})
                .get("metadata", {})
                .get("uid", old_uid)
                != old_uid
            ),
            60,
        )
        kubectl("wait", "--for=condition=Ready", f"pod/{POD}", "-n", namespace, "--timeout=120s")
        (restored,) = wait_for("the restore's metric", lambda: _metric_after_restore(kubectl, namespace), 60)
        assert restored < changelog_records / 10, (restored, changelog_records)
        log = kubectl("logs", POD, "-n", namespace).stdout
        loaded = [json.loads(line) for line in log.splitlines() if "store loaded from snapshot" in line]
        assert len(loaded) == 2 and sum(line["records"] for line in loaded) == len(producer.sent), loaded
        print(f"changelog {changelog_records}, compaction {compaction}, restored {restored}, loaded {loaded}")
        producer.batch(200)
        wait_for("counts after", lambda: counts(kafka_bootstrap, counts_topic) == dict(producer.sent), 90)
    except BaseException:
        print(operator.text()[-6000:])
        raise
    finally:
        operator.kill()
        if runner == "SparkOperator":
            kubectl("delete", "sapp", APP, "-n", namespace, "--wait=false", check=False)
            spark_operator.uninstall(release, namespace)


def _run_the_cronjob(kubectl: KubectlFn, namespace: str) -> dict[str, Any]:
    """``kubectl create job --from=cronjob/...``, as an operator of the app would; the Job's Pod
    (the driver) once the Job completed."""
    cronjob = compactor_name({"metadata": {"name": APP}})
    kubectl("create", "job", "compact-1", f"--from=cronjob/{cronjob}", "-n", namespace)
    done = kubectl(
        "wait", "--for=condition=complete", "job/compact-1", "-n", namespace, "--timeout=300s", check=False
    )
    if done.returncode != 0:  # what the driver and the executors said, before the namespace goes
        for what in (["get", "pods,events", "-o", "wide"], ["logs", "job/compact-1", "--tail=150"]):
            print(kubectl(*what, "-n", namespace, check=False).stdout[-12000:])
        pytest.fail(f"the compaction Job did not complete: {done.stderr}", pytrace=False)
    (pod,) = get_json(kubectl, "pods", "-n", namespace, "-l", "job-name=compact-1")["items"]
    assert isinstance(pod, dict)
    assert (
        get_json(kubectl, "job", "compact-1", "-n", namespace)["spec"]["template"]["spec"][
            "serviceAccountName"
        ]
        == pod["spec"]["serviceAccountName"]
    )
    return pod


def _run_on_schedule(kubectl: KubectlFn, namespace: str) -> dict[str, Any]:
    """The StreamApp's schedule moved to the coming minute (at least 20 s away, so the operator
    has passed it on and the Spark Operator computed its next run from it); the run that starts
    then, to its end; the driver Pod Spark created for it."""
    name = compactor_name({"metadata": {"name": APP}})
    at = datetime.now(UTC) + timedelta(seconds=80)  # a minute from 20 to 80 s away
    schedule = f"{at.minute} {at.hour} * * *"
    # the StreamApp's schedule is what the operator writes into the ScheduledSparkApplication
    kubectl(
        "patch",
        "sapp",
        APP,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        json.dumps({"spec": {"compaction": {"schedule": schedule}}}),
    )
    wait_for(
        "the schedule in the ScheduledSparkApplication",
        lambda: (
            get_json(kubectl, "scheduledsparkapplication", name, "-n", namespace)["spec"]["schedule"]
            == schedule
        ),
        60,
    )
    run = wait_for(
        "the scheduled run",
        lambda: (
            get_json(kubectl, "scheduledsparkapplication", name, "-n", namespace)
            .get("status", {})
            .get("lastRunName")
        ),
        180,
    )
    state = wait_for(
        "the run's end",
        lambda: (
            (try_get_json(kubectl, "sparkapplication", run, "-n", namespace) or {})
            .get("status", {})
            .get("applicationState", {})
            .get("state")
            if _finished(kubectl, namespace, run)
            else None
        ),
        360,
    )
    if state != "COMPLETED":
        for what in (["get", "pods,events", "-o", "wide"], ["get", "sparkapplication", run, "-o", "yaml"]):
            print(kubectl(*what, "-n", namespace, check=False).stdout[-12000:])
        print(kubectl("logs", f"{run}-driver", "-n", namespace, "--tail=150", check=False).stdout)
        pytest.fail(f"the SparkApplication {run} ended {state}", pytrace=False)
    app = get_json(kubectl, "sparkapplication", run, "-n", namespace)
    refs = app["metadata"]["ownerReferences"]
    assert [(r["kind"], r["name"]) for r in refs] == [("ScheduledSparkApplication", name)], refs
    driver: dict[str, Any] = get_json(kubectl, "pod", app["status"]["driverInfo"]["podName"], "-n", namespace)
    return driver


def _finished(kubectl: KubectlFn, namespace: str, run: str) -> bool:
    app = try_get_json(kubectl, "sparkapplication", run, "-n", namespace) or {}
    return app.get("status", {}).get("applicationState", {}).get("state") in {
        "COMPLETED",
        "FAILED",
        "SUBMISSION_FAILED",
    }


def _metric_after_restore(kubectl: KubectlFn, namespace: str) -> tuple[float] | None:
    """The restored-records total once the new Pod serves metrics and is ready."""
    pod = get_json(kubectl, "pod", POD, "-n", namespace)
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", []))
    if not ready:
        return None
    try:
        return (_restored_records(kubectl, namespace),)
    except OSError:
        return None


class Executors:
    """Watches the Spark executor Pods while a run goes on; with ``delete_one``, deletes the first
    one once two run.

    Spark labels executors ``spark-role=executor``; their owner is the driver Pod (the Job's),
    so they go away with it. What each was (image, node, owner) is kept as seen."""

    def __init__(self, kubectl: KubectlFn, namespace: str, *, delete_one: bool) -> None:
        self.kubectl, self.namespace, self.delete_one = kubectl, namespace, delete_one
        self.seen: dict[str, dict[str, Any]] = {}
        self.deleted: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Executors:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _watch(self) -> None:
        while not self._stop.wait(0.3):
            pods = try_get_json(self.kubectl, "pods", "-n", self.namespace, "-l", "spark-role=executor")
            running = []
            for pod in (pods or {}).get("items", []):
                name = pod["metadata"]["name"]
                self.seen[name] = {
                    "image": pod["spec"]["containers"][0]["image"],
                    "node": pod["spec"].get("nodeName"),
                    "owner": [ref["name"] for ref in pod["metadata"].get("ownerReferences", [])],
                }
                if (
                    pod["status"].get("phase") == "Running"
                    and pod["metadata"].get("deletionTimestamp") is None
                ):
                    running.append(name)
            if self.delete_one and self.deleted is None and len(running) >= 2:
                self.deleted = running[0]
                self.kubectl("delete", "pod", self.deleted, "-n", self.namespace, "--wait=false")
