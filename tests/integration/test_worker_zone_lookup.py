"""The worker's zone lookup (baton/worker/zone.py) against the real API server and real Nodes,
as the workers' ServiceAccount: bound to the node-reader ClusterRole the way the operator
binds it, it reads its Node's label; a Node without the label, and a ServiceAccount without
the binding, leave the worker without a zone, with the reason."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.operator.core.builders.rack import node_reader_binding
from baton.operator.core.rbac import rbac_objects
from baton.testing import wait_for
from baton.worker.config import WorkerConfig
from baton.worker.zone import api_client, node_zone, with_node_zone
from tests.support.operator import KubectlFn, apply, service_account_kubeconfig
from tests.support.samples import app

pytestmark = pytest.mark.integration

ZONE = "topology.kubernetes.io/zone"


@pytest.fixture
def nodes(kubectl: KubectlFn) -> Iterator[dict[str, str]]:
    """Two Nodes nobody schedules onto (tainted): one in zone-q with a rack label, one without."""
    suffix = uuid.uuid4().hex[:8]
    made = {"labelled": f"zone-test-{suffix}-a", "bare": f"zone-test-{suffix}-b"}
    for kind, name in made.items():
        labels = {ZONE: "zone-q", "example.com/rack": "r7"} if kind == "labelled" else {}
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": [{"key": "baton.dev/zone-test", "value": "x", "effect": "NoSchedule"}]},
        }
        kubectl("create", "-f", "-", input=json.dumps(node))
    yield made
    for name in made.values():
        kubectl("delete", "node", name, "--wait=false", check=False)


def _api_as(kubectl: KubectlFn, kube: Any, namespace: str, sa: str, tmp_path: Path) -> Any:
    kubectl("create", "serviceaccount", sa, "-n", namespace)
    path = service_account_kubeconfig(kubectl, kube, namespace, sa, tmp_path / f"{sa}.kubeconfig")
    from kubernetes import client, config

    configuration = client.Configuration()
    config.load_kube_config(config_file=str(path), client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)


def test_a_bound_worker_reads_its_nodes_zone_and_falls_back_without_it(
    kube: Any, kubectl: KubectlFn, namespace: str, nodes: dict[str, str], tmp_path: Path
) -> None:
    (reader,) = [
        o for o in rbac_objects("baton-operator", namespace) if o["metadata"]["name"].endswith("-node-reader")
    ]
    apply(kubectl, reader)
    sample = app(rack={}).model_copy(update={"namespace": namespace})
    binding = node_reader_binding(sample, reader["metadata"]["name"])
    apply(kubectl, binding)
    try:
        worker = _api_as(kubectl, kube, namespace, "click-counter-worker", tmp_path)
        found = wait_for(  # RBAC reaches the authorizer's cache a moment after the binding
            "the labelled Node's zone",
            lambda: node_zone(nodes["labelled"], ZONE, worker).zone,
            timeout=30,
        )
        assert found == "zone-q"
        assert node_zone(nodes["labelled"], "example.com/rack", worker).zone == "r7", "any label key"

        bare = node_zone(nodes["bare"], ZONE, worker)
        assert bare.zone is None and bare.problem == f"Node {nodes['bare']} has no label {ZONE}"
        gone = node_zone(f"{nodes['bare']}-gone", ZONE, worker)
        assert gone.zone is None and gone.problem is not None and "404" in gone.problem

        config = WorkerConfig(
            topology="examples.click_counter:topology",
            bootstrap_servers="k:9092",
            application_id="clicks",
            zone_node_label=ZONE,
            node_name=nodes["labelled"],
        )
        resolved = with_node_zone(config, worker)
        assert (resolved.zone, resolved.zone_node_label) == ("zone-q", None)
        unresolved = with_node_zone(config.model_copy(update={"node_name": nodes["bare"]}), worker)
        assert (unresolved.zone, unresolved.zone_node_label) == (None, None), "children do not look again"
        given = config.model_copy(update={"zone": "zone-z"})
        assert with_node_zone(given, worker) is given, "a zone given outright wins; no request"

        # A ServiceAccount the operator did not bind: refused, said so, no zone (after the retries).
        stranger = _api_as(kubectl, kube, namespace, "stranger", tmp_path)
        refused = node_zone(nodes["labelled"], ZONE, stranger)
        assert refused.zone is None and refused.problem is not None
        assert "403" in refused.problem and "node-reader ClusterRole" in refused.problem
    finally:
        kubectl("delete", "clusterrolebinding", binding["metadata"]["name"], check=False)


def test_the_kubeconfig_is_used_outside_a_pod(
    kube: Any, nodes: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No in-cluster token here: the client falls back to KUBECONFIG (a worker run outside a cluster)."""
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert node_zone(nodes["labelled"], ZONE, api_client()).zone == "zone-q"
