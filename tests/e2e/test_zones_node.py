"""spec.rack end to end: the operator, the stack's node and the workers, every part real.

The workers run as Pods on the node from the runtime image, with the projected ServiceAccount
token the kubelet mounts. The Node is labelled with a zone for this test; the operator binds
the app's workers to the node-reader ClusterRole; each worker reads its Node (through the
``kubernetes`` Service) as its own ServiceAccount and reports the zone (and processes
clicks). A second label key shows ``rack.topologyKey`` is honoured.
"""

from __future__ import annotations

import json
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from baton.operator.core.rbac import rbac_objects
from baton.testing import wait_for
from tests.conftest import Node
from tests.support.deploy import Clicks, bluegreen_manifest, counts
from tests.support.operator import KubectlFn, apply, install_crds, start_operator

pytestmark = pytest.mark.e2e

PODS = ("click-counter-blue-0", "click-counter-blue-1")


def _zone_lines(kubectl: KubectlFn, namespace: str, pod: str) -> list[dict[str, Any]]:
    log = kubectl("logs", pod, "-n", namespace, check=False).stdout
    lines = []
    for line in log.splitlines():
        if '"zone' in line and line.startswith("{"):
            try:
                lines.append(json.loads(line))
            except ValueError:
                continue
    return [d for d in lines if d.get("logger") == "baton.worker.zone"]


def test_workers_take_their_nodes_zone(  # noqa: PLR0917 (fixtures)
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
    (reader,) = [
        o for o in rbac_objects("baton-operator", namespace) if o["metadata"]["name"].endswith("-node-reader")
    ]
    apply(kubectl, reader)  # what the chart ships; the operator's default --node-reader-role
    clicks_topic, counts_topic = new_topic(partitions=4), new_topic(partitions=4)
    manifest = bluegreen_manifest(
        namespace,
        unique_name,
        {"bootstrapServers": node.kafka_bootstrap},
        (clicks_topic, counts_topic),
        image=node_runtime_image,
        replicas=2,
        standbyReplicas=1,
        upgrade={"strategy": "Rolling", "promotionTimeoutSeconds": 120},
        rack={"topologyKey": "example.com/rack"},
    )
    manifest["spec"]["podTemplate"]["tolerations"] = [node.toleration]
    producer = Clicks(kafka_bootstrap, clicks_topic)
    # the node is shared: its labels go again at the end
    kubectl("label", "node", node.name, "topology.kubernetes.io/zone=zone-e2e", "example.com/rack=rack-7")
    operator = start_operator(tmp_path, namespace, kube.kubeconfig, "operator")
    try:
        apply(kubectl, manifest)
        kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=120s")
        for pod in PODS:
            lines = wait_for(f"{pod}'s zone line", partial(_zone_lines, kubectl, namespace, pod), timeout=30)
            assert [(d["msg"], d.get("zone"), d.get("node")) for d in lines] == [
                ("zone from the node", "rack-7", node.name)
            ], lines
        producer.batch(200)
        wait_for("the counts", lambda: counts(kafka_bootstrap, counts_topic) == dict(producer.sent), 60)
    finally:
        kubectl("delete", "sapp", "click-counter", "-n", namespace, "--timeout=60s", check=False)
        operator.kill()
        kubectl("label", "node", node.name, "topology.kubernetes.io/zone-", "example.com/rack-", check=False)
    binding = f"baton-worker-nodes.{namespace}.click-counter"
    assert kubectl("get", "clusterrolebinding", binding, check=False).returncode != 0, "deleted with the app"
