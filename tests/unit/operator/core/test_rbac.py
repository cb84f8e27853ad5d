"""The operator's RBAC rules: what it needs, and nothing it must not have."""

from __future__ import annotations

import pytest

from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.rack import DEFAULT_NODE_READER_ROLE
from baton.operator.core.rbac import node_reader_rules, node_zone_rules, operator_rules, rbac_objects
from tests.support.samples import app

pytestmark = pytest.mark.unit


def _allows(rules: list[dict[str, object]], group: str, resource: str, verb: str) -> bool:
    return any(
        group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"]  # type: ignore[operator]
        for r in rules
    )


def test_can_manage_every_kind_it_builds() -> None:
    rules = operator_rules()
    for obj in desired_objects(app()):
        group = obj["apiVersion"].rpartition("/")[0]
        resource = {
            "StatefulSet": "statefulsets",
            "Service": "services",
            "ServiceAccount": "serviceaccounts",
            "PodDisruptionBudget": "poddisruptionbudgets",
        }[obj["kind"]]
        for verb in ("get", "list", "watch", "create", "patch", "delete"):
            assert _allows(rules, group, resource, verb), (obj["kind"], verb)


def test_streamapp_status_events_and_the_lease() -> None:
    rules = operator_rules()
    assert _allows(rules, "baton.dev", "streamapps", "watch")
    assert _allows(rules, "baton.dev", "streamapps/status", "patch")
    assert _allows(rules, "baton.dev", "streamapps/finalizers", "update")
    assert _allows(rules, "", "events", "create")
    assert not any("kopf.dev" in r["apiGroups"] for r in rules), "kopf's peering is not used"
    assert not _allows(rules, "coordination.k8s.io", "leases", "update"), "leases only in its namespace"
    for clusterwide in (True, False):
        objs = rbac_objects("baton-operator", "baton-system", clusterwide=clusterwide)
        (role,) = [
            o for o in objs if o["kind"] == "Role" and o["metadata"]["name"].endswith("-leader-election")
        ]
        assert role["metadata"]["namespace"] == "baton-system"
        for verb in ("get", "create", "update"):
            assert _allows(role["rules"], "coordination.k8s.io", "leases", verb)


def test_least_privilege() -> None:
    rules = operator_rules()
    flat = {
        (g, r, v)
        for rule in rules
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    assert not any(r in ("secrets", "pods/exec", "*") or v == "*" or g == "*" for g, r, v in flat)
    assert not _allows(rules, "baton.dev", "streamapps", "create")
    assert not _allows(rules, "baton.dev", "streamapps", "delete")


def test_rbac_objects_bind_the_service_account() -> None:
    sa, role, binding, lease_role, lease_binding, _reader, _compactor = rbac_objects(
        "baton-operator", "baton-system"
    )
    assert (lease_role["kind"], lease_binding["kind"]) == ("Role", "RoleBinding")
    assert sa["metadata"] == {
        "name": "baton-operator",
        "namespace": "baton-system",
        "labels": {"app.kubernetes.io/name": "baton", "app.kubernetes.io/component": "operator"},
    }
    assert role["kind"] == "ClusterRole" and binding["kind"] == "ClusterRoleBinding"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "baton-operator", "namespace": "baton-system"}
    ]
    _, ns_role, ns_binding, discovery, _, zones, zones_binding, *_ = rbac_objects(
        "op", "team-a", clusterwide=False
    )
    assert ns_role["kind"] == "Role" and ns_role["metadata"]["namespace"] == "team-a"
    assert ns_binding["roleRef"]["kind"] == "Role"
    assert discovery["kind"] == "ClusterRole"
    assert {v for r in discovery["rules"] if "resourceNames" not in r for v in r["verbs"]} == {
        "list",
        "watch",
    }
    named = [r for r in discovery["rules"] if "resourceNames" in r]
    assert [(r["resourceNames"], r["verbs"]) for r in named] == [(["streamapps.baton.dev"], ["get", "patch"])]
    assert (zones["kind"], zones["metadata"]["name"]) == ("ClusterRole", "baton-operator-team-a-node-zones")
    assert zones["rules"] == node_zone_rules()
    assert zones_binding["roleRef"]["name"] == zones["metadata"]["name"]


def test_the_operator_binds_two_named_cluster_roles_and_writes_no_rules() -> None:
    """The operator binds zone-aware apps' workers to the node reader and compaction Jobs to the
    compactor role: ``bind`` on those two by name, no Role or ClusterRole written, no escalate,
    and it does not hold what they grant (no get on nodes)."""
    rules = operator_rules(clusterwide=True)
    assert not _allows(rules, "", "nodes", "get")
    for verb in ("create", "patch", "delete", "list", "watch"):
        assert _allows(rules, "rbac.authorization.k8s.io", "clusterrolebindings", verb), verb
        assert _allows(rules, "rbac.authorization.k8s.io", "rolebindings", verb), verb
    for kind in ("roles", "clusterroles"):
        for verb in ("create", "patch", "update", "escalate"):
            assert not _allows(rules, "rbac.authorization.k8s.io", kind, verb), (kind, verb)
    binds = [r for r in rules if "bind" in r["verbs"]]
    assert [(r["resources"], r["resourceNames"], r["verbs"]) for r in binds] == [
        (["clusterroles"], ["baton-operator-compactor"], ["bind"]),
        (["clusterroles"], ["baton-operator-node-reader"], ["bind"]),
    ]
    namespaced = operator_rules(clusterwide=False)
    assert not _allows(namespaced, "rbac.authorization.k8s.io", "clusterrolebindings", "create")
    for clusterwide in (True, False):
        (reader,) = [
            o
            for o in rbac_objects("baton-operator", "baton-system", clusterwide=clusterwide)
            if o["metadata"]["name"].endswith("-node-reader")
        ]
        assert reader["kind"] == "ClusterRole"
        assert reader["metadata"]["name"] == DEFAULT_NODE_READER_ROLE, "the operator's default role"
        assert (
            reader["rules"]
            == node_reader_rules()
            == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}]
        )
