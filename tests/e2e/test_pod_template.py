"""What a platform team puts into worker Pods, on the stack's node: the operator's ServiceAccount
annotated (a cloud identity), a Secret volume mounted in the worker and in a sidecar, the
topology's settings from a ConfigMap by envFrom, and a topology spread constraint. The app
runs and counts exactly; each addition is where the Pod shows it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import orjson
import pytest

from baton.testing import produce, wait_for
from tests.conftest import Node
from tests.support.deploy import USERS, counts
from tests.support.operator import KubectlFn, apply, example_manifest, get_json, install_crds, start_operator

pytestmark = pytest.mark.e2e

APP = "click-counter"
ROLE = "arn:aws:iam::123456789012:role/clicks"
EXPANDABLE = "baton-expandable"


def test_a_worker_pod_with_the_platform_teams_additions_runs_and_counts(  # noqa: PLR0917
    node: Node,
    node_runtime_image: str,
    kube: Any,
    kubectl: KubectlFn,
    namespace: str,
    kafka_bootstrap: str,
    new_topic: Any,
    unique_name: str,
    tmp_path: Path,
) -> None:
    install_crds(kubectl)
    # the node's provisioner, in a class that allows expansion (the default one does not)
    apply(
        kubectl,
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": EXPANDABLE},
            "provisioner": "rancher.io/local-path",
            "volumeBindingMode": "WaitForFirstConsumer",
            "allowVolumeExpansion": True,
        },
    )
    clicks, counts_topic = new_topic(partitions=2), new_topic(partitions=2)
    for obj in (
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "click-topics", "namespace": namespace},
            # the topology reads its topic names from these variables: wrong or missing, no counts
            "data": {"CLICKS_TOPIC": clicks, "COUNTS_TOPIC": counts_topic},
        },
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "extra-files", "namespace": namespace},
            "stringData": {"greeting": "hello from a Secret"},
        },
    ):
        apply(kubectl, obj)
    sidecar = {
        "name": "shipper",
        "image": node_runtime_image,
        "imagePullPolicy": "Never",
        "command": [
            "python",
            "-c",
            "import time; print(open('/shared/greeting').read(), flush=True); time.sleep(1e6)",
        ],
        "volumeMounts": [{"name": "extra", "mountPath": "/shared", "readOnly": True}],
    }
    spread = {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}
    manifest = example_manifest(
        namespace,
        image=node_runtime_image,
        imagePullPolicy="Never",
        kafka={"bootstrapServers": node.kafka_bootstrap},
        applicationId=unique_name,
        replicas=2,
        standbyReplicas=0,
        resources={},
        state={"store": "rocksdb", "size": "128Mi", "storageClassName": EXPANDABLE},
        upgrade={"strategy": "Rolling"},
        placement={"antiAffinity": "None"},  # two Pods on the one node
        podTemplate={
            "tolerations": [node.toleration],
            "envFrom": [{"configMapRef": {"name": "click-topics"}}],
            "volumes": [{"name": "extra", "secret": {"secretName": "extra-files"}}],
            "volumeMounts": [{"name": "extra", "mountPath": "/etc/extra", "readOnly": True}],
            "sidecars": [sidecar],
            "topologySpreadConstraints": [spread],
            "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": ROLE}},
            "securityContext": {"fsGroup": 2000},
            "probes": {"readiness": {"periodSeconds": 3}, "startup": {"failureThreshold": 60}},
            "statefulSet": {"labels": {"team": "platform"}},
            "persistentVolumeClaim": {"labels": {"backup": "daily"}},
        },
        worker={"logLevel": "debug"},
    )
    operator = start_operator(tmp_path, namespace, kube.kubeconfig, "operator")
    try:
        apply(kubectl, manifest)
        kubectl("wait", "--for=condition=Ready", f"sapp/{APP}", "-n", namespace, "--timeout=180s")
        sent: dict[str, int] = {}
        users = [USERS[i % len(USERS)] for i in range(500)]
        for user in users:
            sent[user] = sent.get(user, 0) + 1
        now = int(time.time())
        produce(
            kafka_bootstrap,
            clicks,
            [(u.encode(), orjson.dumps({"user_id": u, "timestamp": now})) for u in users],
        )
        wait_for("exact counts", lambda: counts(kafka_bootstrap, counts_topic) == sent, 90)

        account = get_json(kubectl, "serviceaccount", f"{APP}-worker", "-n", namespace)
        assert account["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == ROLE
        pod = get_json(kubectl, "pod", f"{APP}-blue-0", "-n", namespace)
        spec = pod["spec"]
        assert spec["serviceAccountName"] == f"{APP}-worker"
        assert [c["name"] for c in spec["containers"]] == ["worker", "shipper"]
        shipper = spec["containers"][1]
        assert shipper["securityContext"]["readOnlyRootFilesystem"] is True  # the worker's, by default
        (constraint,) = spec["topologySpreadConstraints"]
        assert constraint["labelSelector"]["matchLabels"]["baton.dev/color"] == "blue"
        statuses = {c["name"]: c for c in pod["status"]["containerStatuses"]}
        assert statuses["shipper"]["ready"] and statuses["worker"]["ready"], statuses
        # the Secret's file, in the worker where podTemplate mounted it and in the sidecar
        seen = kubectl(
            "exec", f"{APP}-blue-0", "-n", namespace, "-c", "worker", "--", "cat", "/etc/extra/greeting"
        )
        assert seen.stdout == "hello from a Secret"
        logs = kubectl("logs", f"{APP}-blue-0", "-n", namespace, "-c", "shipper").stdout
        assert "hello from a Secret" in logs
        # the platform's tuning, where Kubernetes shows it
        assert spec["securityContext"]["fsGroup"] == 2000 and spec["securityContext"]["runAsNonRoot"]
        worker = spec["containers"][0]
        assert worker["readinessProbe"]["periodSeconds"] == 3
        assert worker["startupProbe"]["failureThreshold"] == 60
        assert {"name": "BATON_LOG_LEVEL", "value": "debug"} in worker["env"]
        sts = get_json(kubectl, "statefulset", f"{APP}-blue", "-n", namespace)
        assert sts["metadata"]["labels"]["team"] == "platform"
        claim = get_json(kubectl, "pvc", f"state-{APP}-blue-0", "-n", namespace)
        assert claim["metadata"]["labels"]["backup"] == "daily"
        assert '"level":"debug"' in kubectl("logs", f"{APP}-blue-0", "-n", namespace, "-c", "worker").stdout
        # the variables came from the ConfigMap, under the operator's own
        env = kubectl(
            "exec", f"{APP}-blue-1", "-n", namespace, "-c", "worker", "--", "printenv", "COUNTS_TOPIC"
        )
        assert env.stdout.strip() == counts_topic

        # a larger state size: the operator asks each existing claim for it (the claim templates
        # of the StatefulSet never change)
        grown = json.loads(json.dumps(manifest))
        grown["spec"]["state"]["size"] = "256Mi"
        apply(kubectl, grown)

        def requested() -> set[str]:
            found = get_json(kubectl, "pvc", "-n", namespace, "-l", f"baton.dev/app={APP}")["items"]
            return {c["spec"]["resources"]["requests"]["storage"] for c in found}

        wait_for("both claims asked for 256Mi", lambda: requested() == {"256Mi"}, 60)
        events = get_json(kubectl, "events", "-n", namespace, "--field-selector", "reason=ClaimExpanded")
        assert len(events["items"]) >= 2, events
    except BaseException:
        print(operator.text()[-6000:])
        raise
    finally:
        operator.kill()
