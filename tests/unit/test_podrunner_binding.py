"""Which Pods the pod runner binds, and the PersistentVolume it creates for a claim."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from batondev.podrunner.claims import prepare_dir, pv_name, pv_object
from batondev.podrunner.node import TAINT_KEY, node_object
from batondev.podrunner.runner import wants_binding
from batondev.podrunner.volumes import Layout

pytestmark = pytest.mark.unit

LABELS = node_object("baton-local", taint=False)["metadata"]["labels"]


def pod(**spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "n"}, "spec": {"containers": [], **spec}, "status": {}}


def test_binds_only_pending_default_scheduled_fitting_pods() -> None:
    assert wants_binding(pod(), LABELS)
    assert wants_binding(pod(nodeSelector={"kubernetes.io/os": "linux"}), LABELS)
    assert not wants_binding(pod(nodeSelector={"disk": "ssd"}), LABELS)
    assert not wants_binding(pod(nodeName="elsewhere"), LABELS)
    assert not wants_binding(pod(schedulerName="other"), LABELS)
    assert not wants_binding(pod(schedulingGates=[{"name": "wait"}]), LABELS)
    deleting = pod()
    deleting["metadata"]["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    assert not wants_binding(deleting, LABELS)


def test_node_taint() -> None:
    assert node_object("x", taint=True)["spec"]["taints"][0]["key"] == TAINT_KEY
    assert "taints" not in node_object("x", taint=False)["spec"]


CLAIM: dict[str, Any] = {
    "metadata": {"name": "state-app-0", "namespace": "ns1", "uid": "abc"},
    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}},
}


def test_pv_is_prebound_to_the_claim() -> None:
    pv = pv_object(CLAIM, "baton-local", "/data/x")
    spec = pv["spec"]
    assert spec["claimRef"]["uid"] == "abc" and spec["claimRef"]["name"] == "state-app-0"
    assert spec["capacity"] == {"storage": "2Gi"}
    assert spec["storageClassName"] == ""
    assert spec["hostPath"]["path"] == "/data/x"
    terms = spec["nodeAffinity"]["required"]["nodeSelectorTerms"]
    assert terms[0]["matchExpressions"][0]["values"] == ["baton-local"]
    assert pv_name("ns1", "state-app-0", "abc") != pv_name("ns1", "state-app-0", "abd")
    assert len(pv_name("n" * 63, "c" * 253, "u")) <= 253


def test_a_new_claim_of_the_same_name_starts_empty(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    prepare_dir(layout, "ns1", "c", "uid-1")
    (layout.claim_dir("ns1", "c") / "f").write_text("kept")
    prepare_dir(layout, "ns1", "c", "uid-1")  # the same claim, a new Pod: data stays
    assert (layout.claim_dir("ns1", "c") / "f").read_text() == "kept"
    prepare_dir(layout, "ns1", "c", "uid-2")  # a new claim object: empty
    assert not any(layout.claim_dir("ns1", "c").iterdir())
