"""The operator end to end on the broker's mutual-TLS listener, configured in Strimzi's shape.

A StreamApp with ``spec.kafka.tls`` (the stack CA's certificate in a Secret) and
``authentication.type: tls`` (a client certificate and key in a Secret, as a Strimzi KafkaUser
writes them) runs as Pods on the stack's node from the runtime image (the kubelet mounts the
Secrets), against the broker's mutual-TLS listener on the node's address. Its
principal, the certificate's common name, holds exactly the ACLs docs/security.md lists; the
broker denies everything else. The operator connects with the same Secrets (control topic,
lags, standby coverage). A deploy of a new revision flips to green; ``baton flip --to blue``
(with the same certificate in a client.properties) flips back; the read_committed counts
equal the input, user by user, and never go backwards; the compactor's Job (from the
operator's CronJob) snapshots the changelogs over the same listener; ``baton status`` reports.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from batondev import kafka as stack_kafka
from batondev import tls

from baton.operator.core.compaction.cronjob import compactor_name
from baton.testing import wait_for
from tests.conftest import Node
from tests.support import acls
from tests.support.deploy import Clicks, bluegreen_manifest, counts, status
from tests.support.operator import KubectlFn, apply, install_crds, start_operator
from tests.support.secured import exact_sequences, properties_file

pytestmark = pytest.mark.e2e

SNAPSHOT_CLAIM: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "PersistentVolumeClaim",
    # one node: the workers and the compactor's Job share a ReadWriteOnce volume there
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "64Mi"}}},
}


def _secret(kubectl: KubectlFn, namespace: str, name: str, files: dict[str, Path]) -> None:
    args = [f"--from-file={key}={path}" for key, path in files.items()]
    kubectl("create", "secret", "generic", name, "-n", namespace, *args)


def _baton(*args: str, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    cmd = [sys.executable, "-m", "baton.cli", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=env)


def test_operator_deploys_and_flips_over_mutual_tls(  # noqa: PLR0917 (fixtures)
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
) -> None:
    install_crds(kubectl)
    clicks_topic, counts_topic = new_topic(partitions=4), new_topic(partitions=4)
    principal = f"{unique_name}-app"
    user = tls.issue_client(principal, tmp_path)
    acls.grant(f"User:{principal}", acls.app_grants(unique_name, [clicks_topic], [counts_topic]))
    _secret(kubectl, namespace, "kafka-cluster-ca", {"ca.crt": tls.ca_file()})
    _secret(kubectl, namespace, principal, {"user.crt": user.certificate, "user.key": user.key})
    manifest = bluegreen_manifest(
        namespace,
        unique_name,
        {
            "bootstrapServers": stack_kafka.node_mtls_bootstrap(),
            "tls": {"trustedCertificates": [{"secretName": "kafka-cluster-ca"}]},
            "authentication": {"type": "tls", "certificateAndKey": {"secretName": principal}},
        },
        (clicks_topic, counts_topic),
        compaction={
            "enabled": True,
            "snapshotVolumeClaim": "snaps",
            "schedule": "0 0 1 1 *",  # runs when this test creates a Job from it
            "sparkMaster": "local[1]",
            "spark": {"driverMemory": "512m", "conf": {"spark.sql.shuffle.partitions": "2"}},
            "image": node_compactor_image,
        },
        image=node_runtime_image,
    )
    manifest["spec"]["podTemplate"]["tolerations"] = [node.toleration]
    apply(kubectl, SNAPSHOT_CLAIM | {"metadata": {"name": "snaps", "namespace": namespace}})
    producer = Clicks(kafka_bootstrap, clicks_topic)  # the test's own input, over PLAINTEXT

    def worker_log() -> str:
        return kubectl("logs", "click-counter-blue-0", "-n", namespace, "--tail=60", check=False).stdout

    operator = start_operator(tmp_path, namespace, kube.kubeconfig, "operator")
    try:
        apply(kubectl, manifest)
        kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=120s")
        producer.batch(300)
        wait_for("blue's counts", lambda: counts(kafka_bootstrap, counts_topic) == dict(producer.sent), 60)

        with producer:  # steady input through the deploy and the manual flip
            manifest["spec"]["podTemplate"]["env"][-1]["value"] = "v2"
            apply(kubectl, manifest)
            wait_for(
                "green active and Stable",
                lambda: (
                    (st := status(kubectl, namespace)).get("activeColor") == "green"
                    and st.get("phase") == "Stable"
                ),
                timeout=150,
                every=0.5,
                detail=worker_log,
            )
            config = properties_file(user.settings(), tmp_path / "client.properties")
            flipped = _baton(
                "flip",
                unique_name,
                "--to",
                "blue",
                "--bootstrap-servers",
                stack_kafka.mtls_bootstrap(),
                "--kafka-config-file",
                str(config),
                "--json",
                kubeconfig=kube.kubeconfig,
            )
            assert flipped.returncode == 0, flipped.stderr
            assert json.loads(flipped.stdout)["committed"] is True
        wait_for(  # and no user's count repeats or goes backwards across the two flips
            "exact counts",
            lambda: exact_sequences(kafka_bootstrap, counts_topic, producer.sent),
            timeout=90,
            every=1,
        )
        # the compactor's Job, on the same listener with the same Secrets, writes snapshots
        cronjob = compactor_name({"metadata": {"name": "click-counter"}})
        kubectl("create", "job", "compact-1", f"--from=cronjob/{cronjob}", "-n", namespace)
        kubectl("wait", "--for=condition=complete", "job/compact-1", "-n", namespace, "--timeout=300s")
        compaction = status(kubectl, namespace)["compaction"]
        # both colors' stores hold every user (each color processes the whole input)
        live = compaction["liveKeys"]
        assert compaction["snapshotsWritten"] >= 2 and live == 2 * len(producer.sent), compaction
        shown = _baton("status", "click-counter", "-n", namespace, kubeconfig=kube.kubeconfig)
        assert "StreamApp" in shown.stdout and "blue" in shown.stdout, shown.stdout + shown.stderr
        # the operator reached Kafka as the app: the control topic and lag are in status
        assert status(kubectl, namespace).get("lag") is not None
    except BaseException:
        print(operator.text()[-6000:])
        print(worker_log())
        raise
    finally:
        kubectl("delete", "sapp", "click-counter", "-n", namespace, "--timeout=60s", check=False)
        operator.kill()
