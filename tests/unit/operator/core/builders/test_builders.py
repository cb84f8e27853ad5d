"""The pure builders: StreamApp -> StatefulSets, Services, PDBs, ServiceAccount."""

from __future__ import annotations

from typing import Any

import pytest

from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.statefulset import spec_hash, statefulset
from baton.operator.core.constants import ANNOTATION_SPEC_HASH, STATE_DIR
from baton.operator.core.spec import StreamApp
from tests.support.samples import app, example_body

pytestmark = pytest.mark.unit


def _by_ref(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


def test_blue_green_creates_both_colors() -> None:
    refs = list(_by_ref(desired_objects(app())))
    assert refs == [
        "ServiceAccount/click-counter-worker",
        "Service/click-counter-blue",
        "PodDisruptionBudget/click-counter-blue",
        "StatefulSet/click-counter-blue",
        "Service/click-counter-green",
        "PodDisruptionBudget/click-counter-green",
        "StatefulSet/click-counter-green",
    ]


def test_rolling_creates_one_color() -> None:
    refs = set(_by_ref(desired_objects(app(upgrade={"strategy": "Rolling"}))))
    assert "StatefulSet/click-counter-blue" in refs
    assert not any("green" in r for r in refs)


def test_every_object_is_owned_and_labelled() -> None:
    for obj in desired_objects(app()):
        meta = obj["metadata"]
        assert meta["namespace"] == "shop"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "baton.dev/v1alpha1",
                "kind": "StreamApp",
                "name": "click-counter",
                "uid": "1234-abcd",
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["labels"]["baton.dev/app"] == "click-counter"
        assert meta["labels"]["app.kubernetes.io/managed-by"] == "baton-operator"


def test_statefulset_shape() -> None:
    sts = statefulset(app(), "green")
    spec = sts["spec"]
    assert spec["replicas"] == 3
    assert spec["podManagementPolicy"] == "Parallel"
    assert spec["serviceName"] == "click-counter-green"
    assert spec["selector"]["matchLabels"] == {"baton.dev/app": "click-counter", "baton.dev/color": "green"}
    labels = spec["template"]["metadata"]["labels"]
    assert spec["selector"]["matchLabels"].items() <= labels.items()
    assert labels["team"] == "analytics"
    (claim,) = spec["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "state"
    assert claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["baton", "run", "examples.click_counter:topology"]
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "metrics"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "metrics"}
    assert container["ports"] == [{"name": "metrics", "containerPort": 8080, "protocol": "TCP"}]
    assert {"name": "state", "mountPath": STATE_DIR} in container["volumeMounts"]
    assert container["resources"] == {
        "requests": {"cpu": "250m", "memory": "512Mi"},
        "limits": {"memory": "1Gi"},
    }
    assert pod["serviceAccountName"] == "click-counter-worker"
    assert pod["automountServiceAccountToken"] is False
    assert pod["terminationGracePeriodSeconds"] == 40
    assert sts["metadata"]["annotations"][ANNOTATION_SPEC_HASH] == spec_hash(app().spec)


def test_pod_meets_pod_security_restricted() -> None:
    """The checks of the "restricted" profile that a Pod spec controls."""
    pod = statefulset(app(), "blue")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["securityContext"]["runAsUser"] > 0
    for container in pod["containers"]:
        sc = container["securityContext"]
        assert sc["allowPrivilegeEscalation"] is False
        assert sc["capabilities"] == {"drop": ["ALL"]}
        assert sc["readOnlyRootFilesystem"] is True
        assert sc["runAsNonRoot"] is True
    allowed = {
        "emptyDir",
        "secret",
        "configMap",
        "persistentVolumeClaim",
        "projected",
        "downwardAPI",
        "ephemeral",
    }
    for volume in pod["volumes"]:
        assert set(volume) - {"name"} <= allowed


def test_memory_store_uses_an_empty_dir() -> None:
    sts = statefulset(app(state={"store": "memory"}), "blue")
    assert sts["spec"]["volumeClaimTemplates"] == []
    assert {"name": "state", "emptyDir": {}} in sts["spec"]["template"]["spec"]["volumes"]


def test_storage_class_and_retention_follow_the_spec() -> None:
    sts = statefulset(
        app(state={"storageClassName": "fast", "size": "5Gi"}, deletionPolicy="DeleteTopics"), "blue"
    )
    assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == "fast"
    assert sts["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Delete"
    assert (
        statefulset(app(), "blue")["spec"]["persistentVolumeClaimRetentionPolicy"]["whenDeleted"] == "Retain"
    )


def test_scheduling_fields_pass_through() -> None:
    tpl = {
        "nodeSelector": {"disk": "ssd"},
        "tolerations": [{"key": "k", "operator": "Exists"}],
        "affinity": {"nodeAffinity": {}},
        "annotations": {"a": "b"},
        "priorityClassName": "high",
        "imagePullSecrets": [{"name": "reg"}],
    }
    sts = statefulset(app(podTemplate=tpl), "blue")
    pod = sts["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"disk": "ssd"}
    assert pod["tolerations"] == [{"key": "k", "operator": "Exists"}]
    assert pod["affinity"] == {"nodeAffinity": {}}
    assert pod["priorityClassName"] == "high"
    assert pod["imagePullSecrets"] == [{"name": "reg"}]
    assert sts["spec"]["template"]["metadata"]["annotations"] == {"a": "b"}


def test_default_affinity_spreads_a_color_over_nodes() -> None:
    pod = statefulset(app(), "blue")["spec"]["template"]["spec"]
    term = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["podAffinityTerm"]["labelSelector"]["matchLabels"]["baton.dev/color"] == "blue"


def test_tls_mounts_the_secret() -> None:
    sample = app(
        kafka={"bootstrapServers": "k:9093", "securityProtocol": "SSL", "secretRef": {"name": "tls"}}
    )
    pod = statefulset(sample, "blue")["spec"]["template"]["spec"]
    assert {"name": "kafka-secret", "secret": {"secretName": "tls", "defaultMode": 0o440}} in pod["volumes"]
    assert {"name": "kafka-secret", "mountPath": "/etc/baton/kafka", "readOnly": True} in (
        pod["containers"][0]["volumeMounts"]
    )


def test_service_and_pdb() -> None:
    objects = _by_ref(desired_objects(app()))
    svc = objects["Service/click-counter-blue"]["spec"]
    assert svc["clusterIP"] == "None"
    assert svc["selector"] == {"baton.dev/app": "click-counter", "baton.dev/color": "blue"}
    assert svc["ports"][0]["name"] == "metrics" and svc["ports"][0]["port"] == 8080
    pdb = objects["PodDisruptionBudget/click-counter-green"]["spec"]
    assert pdb["maxUnavailable"] == 1
    assert pdb["selector"]["matchLabels"]["baton.dev/color"] == "green"
    sa = objects["ServiceAccount/click-counter-worker"]
    assert sa["automountServiceAccountToken"] is False


def test_spec_hash_ignores_scaling_but_not_the_image() -> None:
    base = spec_hash(app().spec)
    assert spec_hash(app(replicas=7).spec) == base
    assert spec_hash(app(paused=True).spec) == base
    assert spec_hash(app(image="ghcr.io/baton-dev/baton:0.2.0").spec) != base


def test_builders_are_deterministic() -> None:
    assert desired_objects(app()) == desired_objects(app())


def test_unapplied_manifest_renders_without_owner_references() -> None:
    body = example_body()
    del body["metadata"]["uid"]
    for obj in desired_objects(StreamApp.from_body(body)):
        assert "ownerReferences" not in obj["metadata"]
