"""spec.rack on the real API server, with the operator running as its own least-privilege
ServiceAccount (baton/operator/core/rbac.py, namespaced): its reconcile binds the app's workers to
the node-reader ClusterRole (the API server's escalation check passes only because the
operator holds what that role grants), the workers' ServiceAccount may then get Nodes and
nothing more, and the binding goes when the app stops using it and when the app is deleted
(no owner reference can do that for a cluster-scoped object)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from baton.testing import wait_for
from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    get_json,
    least_privilege_operators,
    refused_calls,
    try_get_json,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def sa_operator(
    kube: Any, kubectl: KubectlFn, namespace: str, tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    yield from least_privilege_operators(kube, kubectl, namespace, tmp_path)
    # a cluster-scoped leftover of a failed run would outlive the namespace
    kubectl("delete", "clusterrolebinding", "-l", f"baton.dev/namespace={namespace}", check=False)
    kubectl("delete", "clusterrolebinding,clusterrole", f"baton-operator-{namespace}-node-zones", check=False)
    kubectl("delete", "clusterrolebinding,clusterrole", f"baton-operator-{namespace}-discovery", check=False)


def _binding(kubectl: KubectlFn, namespace: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = try_get_json(
        kubectl, "clusterrolebinding", f"baton-worker-nodes.{namespace}.click-counter"
    )
    return found


def _can(kubectl: KubectlFn, who: str, verb: str, resource: str) -> bool:
    out = kubectl("auth", "can-i", verb, resource, f"--as={who}", check=False).stdout.strip()
    return out == "yes"


def test_the_workers_of_a_zone_aware_app_may_get_nodes_until_it_is_deleted(
    sa_operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    op = sa_operator("--no-kafka")
    workers = f"system:serviceaccount:{namespace}:click-counter-worker"
    apply(kubectl, example_manifest(namespace, replicas=1, standbyReplicas=0, rack={}))

    binding = wait_for("the workers' ClusterRoleBinding", lambda: _binding(kubectl, namespace), timeout=60)
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "baton-operator-node-reader",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "click-counter-worker", "namespace": namespace}
    ]
    labels = binding["metadata"]["labels"]
    assert (labels["baton.dev/app"], labels["baton.dev/namespace"]) == ("click-counter", namespace)
    assert "ownerReferences" not in binding["metadata"]
    wait_for("RBAC: the workers may get Nodes", lambda: _can(kubectl, workers, "get", "nodes"), timeout=30)
    for verb, resource in (("list", "nodes"), ("patch", "nodes"), ("get", "secrets"), ("get", "pods")):
        assert not _can(kubectl, workers, verb, resource), (verb, resource)

    pod = get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    (token,) = [v for v in pod["volumes"] if "projected" in v]
    assert any("serviceAccountToken" in s for s in token["projected"]["sources"])
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["BATON_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["BATON_ZONE_NODE_LABEL"]["value"] == "topology.kubernetes.io/zone"

    kubectl("delete", "sapp", "click-counter", "-n", namespace, "--timeout=60s")
    assert _binding(kubectl, namespace) is None, "deleted with the app, before kopf let it go"
    assert not _can(kubectl, workers, "get", "nodes")
    assert not refused_calls(op.text()), op.text()[-3000:]


def test_the_binding_is_pruned_when_no_color_runs_with_rack(
    sa_operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    """Under Rolling the one color takes a spec change at once: spec.rack off prunes the binding
    (by its labels) in the same pass; on again brings it back."""
    op = sa_operator("--no-kafka")
    rolling = {"replicas": 1, "standbyReplicas": 0, "upgrade": {"strategy": "Rolling"}}
    apply(kubectl, example_manifest(namespace, **rolling, rack={"topologyKey": "example.com/rack"}))
    wait_for("the workers' ClusterRoleBinding", lambda: _binding(kubectl, namespace), timeout=60)
    patch = json.dumps({"spec": {"rack": None}})
    kubectl("patch", "sapp", "click-counter", "-n", namespace, "--type=merge", "-p", patch)
    wait_for("pruned", lambda: _binding(kubectl, namespace) is None, timeout=60)
    pod = get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)["spec"]["template"]["spec"]
    assert not [v for v in pod["volumes"] if "projected" in v], "no token without spec.rack"
    events = get_json(kubectl, "events", "-n", namespace)["items"]
    assert any(e["reason"] == "Pruned" and "ClusterRoleBinding" in e["message"] for e in events)
    apply(kubectl, example_manifest(namespace, **rolling, rack={}))
    wait_for("bound again", lambda: _binding(kubectl, namespace), timeout=60)
    assert not refused_calls(op.text()), op.text()[-3000:]
