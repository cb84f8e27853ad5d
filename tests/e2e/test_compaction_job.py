"""The compactor as a deployed app uses it: the operator's CronJob, run as a Job on the stack's
node, snapshots the changelogs into an object store (the stack's MinIO, credentials from a
Secret); a worker whose state volume is lost restores from that snapshot (the metric shows
how little it replayed) and counts stay exact.

Everything is the real thing: the kubelet runs the Job's ``baton compact`` (PySpark in local
mode, S3A) from the compactor image and the workers' ``baton run`` (pyarrow's S3) from the
runtime image, both built from the Dockerfile (dev/image): the JRE, pyspark, the connector
and S3A jars are the image's own.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from batondev import objectstore
from pyarrow import fs as pafs

from baton.compactor.cronjob import compactor_name
from baton.operator.builders.statefulset import STATE_VOLUME
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


def test_the_cronjob_snapshots_and_a_worker_that_lost_its_volume_restores_from_it(  # noqa: PLR0917
    node: Node,
    node_runtime_image: str,
    node_compactor_image: str,
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
            "schedule": "0 0 1 1 *",  # runs when this test creates a Job from it
            "sparkMaster": "local[1]",
            "spark": {"driverMemory": "512m", "conf": {"spark.sql.shuffle.partitions": "2"}},
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
    operator = start_operator(tmp_path, namespace, kube.kubeconfig, "operator")
    try:
        apply(kubectl, keys)
        apply(kubectl, manifest)
        kubectl("wait", "--for=condition=Ready", f"sapp/{APP}", "-n", namespace, "--timeout=100s")
        producer.batch(600)
        wait_for("counts", lambda: counts(kafka_bootstrap, counts_topic) == dict(producer.sent), 60)
        changelog = f"{unique_name}-blue-user-counts-store-changelog"
        changelog_records = len(read_all(kafka_bootstrap, changelog))
        assert changelog_records >= 600, changelog_records

        cronjob = compactor_name({"metadata": {"name": APP}})
        kubectl("create", "job", "compact-1", f"--from=cronjob/{cronjob}", "-n", namespace)
        kubectl(
            "wait",
            "--for=condition=complete",
            "job/compact-1",
            "-n",
            namespace,
            "--timeout=240s",
        )
        (job_pod,) = get_json(kubectl, "pods", "-n", namespace, "-l", "job-name=compact-1")["items"]
        assert job_pod["spec"]["containers"][0]["image"] == node_compactor_image
        assert job_pod["spec"]["nodeName"] == node.name
        (job_status,) = job_pod["status"]["containerStatuses"]
        assert job_status["containerID"].startswith("containerd://"), job_status
        compaction = get_json(kubectl, "sapp", APP, "-n", namespace)["status"]["compaction"]
        assert compaction["liveKeys"] == len(producer.sent), compaction
        assert compaction["recordsRead"] == changelog_records and compaction["snapshotsWritten"] == 2
        assert compaction["findings"] == 0, compaction
        for var, value in objectstore.client_env().items():  # this process reads the bucket too
            monkeypatch.setenv(var, value)
        s3fs, prefix = open_store(store, S3Settings(endpoint))  # the objects are in the bucket
        names = [i.path for i in s3fs.get_file_info(pafs.FileSelector(prefix, recursive=True))]
        assert sum(n.endswith("/_baton.json") for n in names) == 2, names

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
