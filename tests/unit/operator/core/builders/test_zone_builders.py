"""Zones and placement in the pure builders: spec.rack (the worker reads its Node's label: env,
token volume, ClusterRoleBinding) and spec.placement (the colors' pod anti-affinity)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from pydantic import ValidationError

from baton.control.messages import Color
from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.desired import color_runs
from baton.operator.core.builders.rack import (
    API_ACCESS_PATH,
    DEFAULT_NODE_READER_ROLE,
    binding_selector,
    node_reader_binding,
)
from baton.operator.core.builders.statefulset import NOT_DEPLOYED, spec_hash, statefulset
from baton.operator.core.deploy_record import Assignment, DeployRecord, spec_json
from tests.support.samples import app

pytestmark = pytest.mark.unit

ZONE = "topology.kubernetes.io/zone"


def _pod(obj: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = obj["spec"]["template"]["spec"]
    return pod


def _kinds(objects: list[dict[str, Any]]) -> list[str]:
    return [o["kind"] for o in objects]


def test_without_rack_workers_get_no_token_no_node_and_no_binding() -> None:
    objects = desired_objects(app())
    assert "ClusterRoleBinding" not in _kinds(objects)
    for sts in (o for o in objects if o["kind"] == "StatefulSet"):
        pod = _pod(sts)
        assert pod["automountServiceAccountToken"] is False
        assert not [v for v in pod["volumes"] if "projected" in v]
        assert not [m for m in pod["containers"][0]["volumeMounts"] if m["mountPath"] == API_ACCESS_PATH]
        names = {e["name"] for e in pod["containers"][0]["env"]}
        assert not names & {"BATON_NODE_NAME", "BATON_ZONE_NODE_LABEL", "BATON_ZONE"}
    (sa,) = [o for o in objects if o["kind"] == "ServiceAccount"]
    assert sa["automountServiceAccountToken"] is False


def test_rack_gives_the_workers_a_projected_token_and_their_nodes_name() -> None:
    sample = app(rack={"topologyKey": ZONE})
    pod = _pod(statefulset(sample, "blue"))
    # still no automatic token: the one volume below, only in zone-aware apps' Pods
    assert pod["automountServiceAccountToken"] is False
    (volume,) = [v for v in pod["volumes"] if "projected" in v]
    sources = volume["projected"]["sources"]
    assert {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}} in sources
    assert {
        "configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}
    } in sources
    assert {
        "downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}
    } in sources
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == volume["name"]]
    assert mount == {"name": volume["name"], "mountPath": API_ACCESS_PATH, "readOnly": True}
    env = pod["containers"][0]["env"]
    assert {"name": "BATON_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in env
    assert {"name": "BATON_ZONE_NODE_LABEL", "value": ZONE} in env
    assert pod["serviceAccountName"] == "click-counter-worker"


def test_rack_binds_the_workers_service_account_to_the_node_reader() -> None:
    sample = app(rack={})
    objects = desired_objects(sample, node_reader_role="rel-baton-node-reader")
    # after the ServiceAccount it binds, before the Pods that read their Node
    assert _kinds(objects)[:3] == ["ServiceAccount", "ClusterRoleBinding", "Service"]
    binding = objects[1]
    assert binding == node_reader_binding(sample, "rel-baton-node-reader")
    meta = binding["metadata"]
    assert meta["name"] == "baton-worker-nodes.shop.click-counter"
    # cluster-scoped: no namespace, and no owner reference (a namespaced owner cannot own it)
    assert "namespace" not in meta and "ownerReferences" not in meta
    assert meta["labels"]["baton.dev/app"] == "click-counter"
    assert meta["labels"]["baton.dev/namespace"] == "shop"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "baton-operator"
    assert binding_selector("shop", "click-counter") == "baton.dev/app=click-counter,baton.dev/namespace=shop"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "rel-baton-node-reader",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "click-counter-worker", "namespace": "shop"}
    ]
    assert desired_objects(sample)[1]["roleRef"]["name"] == DEFAULT_NODE_READER_ROLE


def test_names_of_bindings_cannot_collide_across_namespaces() -> None:
    """Namespaces have no dots, so namespace "a-b" app "c" and namespace "a" app "b-c" differ."""
    one = node_reader_binding(app(rack={}).model_copy(update={"namespace": "a-b", "name": "c"}))
    other = node_reader_binding(app(rack={}).model_copy(update={"namespace": "a", "name": "b-c"}))
    assert one["metadata"]["name"] != other["metadata"]["name"]


def test_the_binding_stays_while_any_color_runs_with_rack() -> None:
    """Turning spec.rack off deploys to the idle color; the active one still reads its Node until
    the flip, and the rollback target after it: the binding goes when no color runs with it."""
    old, new = app(rack={}), app()
    record = DeployRecord(
        colors={"blue": Assignment(spec_hash(old.spec)), "green": Assignment(spec_hash(new.spec))},
        specs={
            spec_hash(old.spec): spec_json(old.spec.model_dump(mode="json", by_alias=True)),
            spec_hash(new.spec): spec_json(new.spec.model_dump(mode="json", by_alias=True)),
        },
    )
    assert "ClusterRoleBinding" in _kinds(desired_objects(new, color_runs(new, record)))
    assert "ClusterRoleBinding" not in _kinds(desired_objects(new))


def _anti_affinity(sample: Any, color: Color = "blue") -> dict[str, Any]:
    affinity: dict[str, Any] = _pod(statefulset(sample, color))["affinity"]["podAntiAffinity"]
    return affinity


def test_placement_defaults_to_preferring_one_pod_of_a_color_per_node() -> None:
    (term,) = _anti_affinity(app())["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term == {
        "weight": 100,
        "podAffinityTerm": {
            "topologyKey": "kubernetes.io/hostname",
            "labelSelector": {"matchLabels": {"baton.dev/app": "click-counter", "baton.dev/color": "blue"}},
        },
    }


def test_required_anti_affinity_per_zone() -> None:
    anti = _anti_affinity(app(placement={"antiAffinity": "Required", "topologyKey": ZONE}), "green")
    assert set(anti) == {"requiredDuringSchedulingIgnoredDuringExecution"}
    (term,) = anti["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["topologyKey"] == ZONE
    assert term["labelSelector"]["matchLabels"]["baton.dev/color"] == "green", "colors do not repel"


def test_preferred_per_zone_and_none() -> None:
    (term,) = _anti_affinity(app(placement={"topologyKey": ZONE}))[
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert term["podAffinityTerm"]["topologyKey"] == ZONE
    assert "affinity" not in _pod(statefulset(app(placement={"antiAffinity": "None"}), "blue"))


def test_pod_template_affinity_replaces_placement() -> None:
    mine: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    }
    assert _pod(statefulset(app(podTemplate={"affinity": mine}), "blue"))["affinity"] == mine


def test_placement_values_are_checked() -> None:
    with pytest.raises(ValidationError):
        app(placement={"antiAffinity": "Sometimes"})
    with pytest.raises(ValidationError):
        app(rack={"topologykey": ZONE})


def _hash_without_new_fields(sample: Any) -> str:
    """spec_hash as an operator without spec.rack, spec.placement, spec.restartNonce,
    spec.worker.logLevel and the later podTemplate fields computed it."""
    dump = sample.spec.model_dump(
        mode="json", by_alias=True, exclude=set(NOT_DEPLOYED) | {"rack", "placement", "restart_nonce"}
    )
    del dump["worker"]["logLevel"]
    for field in (
        "securityContext",
        "containerSecurityContext",
        "probes",
        "statefulSet",
        "persistentVolumeClaim",
    ):
        del dump["podTemplate"][field]
    return hashlib.sha256(json.dumps(dump, sort_keys=True).encode()).hexdigest()[:16]


def test_an_operator_upgrade_keeps_the_revision_of_apps_without_zones() -> None:
    """A new revision is a blue-green deploy: fields at their defaults leave the hash as it was,
    and render the same StatefulSet as before (the default placement is the old affinity)."""
    for sample in (app(), app(image="img:2", standbyReplicas=2)):
        assert spec_hash(sample.spec) == _hash_without_new_fields(sample)
    base = spec_hash(app().spec)
    assert spec_hash(app(rack={}).spec) != base
    assert spec_hash(app(placement={"antiAffinity": "Required"}).spec) != base
    assert spec_hash(app(placement={"antiAffinity": "Preferred"}).spec) == base
    # the later fields count once set, as anything a Pod runs
    for changed in (
        app(restartNonce="1"),
        app(worker={"logLevel": "debug"}),
        app(podTemplate={"securityContext": {"fsGroup": 2000}}),
        app(podTemplate={"probes": {"liveness": {"periodSeconds": 30}}}),
        app(podTemplate={"statefulSet": {"labels": {"team": "a"}}}),
    ):
        assert spec_hash(changed.spec) != base
