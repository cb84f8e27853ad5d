"""The operator on the real API server: apply the example, get StatefulSets, Pods, Ready, scale.

Issue 5's acceptance: `kubectl apply -f examples/click-counter.yaml` -> StatefulSets,
Services and PDBs with the expected fields; kube-controller-manager creates the Pods; once
they are Ready the StreamApp is Ready and `kubectl wait` returns; `kubectl scale` works;
`kubectl get sapp` shows the columns; a spec the cluster refuses is never half-applied.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from typing import Any

import pytest
from batondev.paths import EXAMPLE

from baton.testing import wait_for
from tests.support.operator import (
    BATON,
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    get_json,
    mark_pods_ready,
    try_get_json,
)

pytestmark = pytest.mark.integration


def _condition(kubectl: KubectlFn, namespace: str, kind: str) -> str | None:
    sapp = try_get_json(kubectl, "sapp", "click-counter", "-n", namespace) or {}
    for cond in sapp.get("status", {}).get("conditions", []):
        if cond["type"] == kind:
            return str(cond["status"])
    return None


def test_example_becomes_ready(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str, kube: Any
) -> None:
    operator("--no-kafka")
    kubectl("apply", "-n", namespace, "-f", str(EXAMPLE))
    sapp = get_json(kubectl, "sapp", "click-counter", "-n", namespace)

    # Ready=False from the first reconcile, with observedGeneration.
    wait_for("Ready=False", lambda: _condition(kubectl, namespace, "Ready") == "False")
    status = get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]
    assert status["observedGeneration"] == 1
    assert {c["type"] for c in status["conditions"]} == {"Ready", "Reconciling", "Stalled", "StandbyReady"}

    for color in ("blue", "green"):
        sts = wait_for(
            f"statefulset {color}",
            lambda c=color: try_get_json(  # type: ignore[misc]
                kubectl, "statefulset", f"click-counter-{c}", "-n", namespace
            ),
        )
        spec = sts["spec"]
        assert spec["replicas"] == 3
        assert spec["podManagementPolicy"] == "Parallel"
        assert spec["serviceName"] == f"click-counter-{color}"
        claim = spec["volumeClaimTemplates"][0]
        assert (
            claim["metadata"]["name"] == "state"
            and claim["spec"]["resources"]["requests"]["storage"] == "2Gi"
        )
        container = spec["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}
        assert env["BATON_APPLICATION_ID"] == f"click-counter-{color}"
        assert env["BATON_COLOR"] == color
        assert env["BATON_CONTROL_TOPIC"] == "click-counter-control"
        assert env["BATON_NUM_STANDBY_REPLICAS"] == "1"
        assert env["BATON_INSTANCE_ID"] == {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}
        assert env["BATON_HOST"] == env["BATON_INSTANCE_ID"]  # the pod: standbys avoid it
        assert env["BATON_PROCESSES"] == "1"  # spec.processesPerPod's default
        assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
        assert {"name": "state", "mountPath": "/var/lib/baton"} in container["volumeMounts"]
        owner = sts["metadata"]["ownerReferences"][0]
        assert owner["uid"] == sapp["metadata"]["uid"] and owner["controller"] is True
        shown = get_json(
            kubectl, "statefulset", f"click-counter-{color}", "-n", namespace, "--show-managed-fields"
        )
        managers = {(m["manager"], m["operation"]) for m in shown["metadata"]["managedFields"]}
        assert ("baton-operator", "Apply") in managers

        svc = get_json(kubectl, "service", f"click-counter-{color}", "-n", namespace)
        assert svc["spec"]["clusterIP"] == "None"
        assert svc["spec"]["selector"] == {"baton.dev/app": "click-counter", "baton.dev/color": color}
        pdb = get_json(kubectl, "pdb", f"click-counter-{color}", "-n", namespace)
        assert pdb["spec"]["maxUnavailable"] == 1
    get_json(kubectl, "serviceaccount", "click-counter-worker", "-n", namespace)

    # kube-controller-manager creates the Pods (and their claims); we play kubelet.
    pods = mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter", 6)
    assert sorted(pods) == sorted(f"click-counter-{c}-{i}" for c in ("blue", "green") for i in range(3))
    pvc = get_json(kubectl, "pvc", "state-click-counter-blue-0", "-n", namespace)
    assert pvc["spec"]["resources"]["requests"]["storage"] == "2Gi"

    kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=60s")
    table = kubectl("get", "sapp", "-n", namespace).stdout.splitlines()
    assert table[0].split() == [
        "NAME",
        "ACTIVE",
        "READY",
        "PHASE",
        "REPLICAS",
        "READY-REPLICAS",
        "LAG",
        "WARM-STANDBYS",
        "AGE",
    ]
    assert table[1].split()[:6] == ["click-counter", "blue", "True", "Stable", "3", "3"]

    events = kubectl(
        "get", "events", "-n", namespace, "--field-selector", "involvedObject.kind=StreamApp"
    ).stdout
    assert "Created" in events and "StatefulSet/click-counter-blue" in events and "Ready" in events

    # `baton status` reads the same status (exit 0 when Ready).
    out = subprocess.run(
        [str(BATON), "status", "click-counter", "-n", namespace],
        capture_output=True,
        text=True,
        env={"KUBECONFIG": str(kube.kubeconfig), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert "phase: Stable" in out.stdout and "active: blue" in out.stdout

    # kubectl scale goes through the scale subresource to spec.replicas, then to both colors.
    kubectl("scale", "sapp/click-counter", "-n", namespace, "--replicas=5")
    for color in ("blue", "green"):
        wait_for(
            f"{color} scaled to 5",
            lambda c=color: (
                get_json(  # type: ignore[misc]
                    kubectl, "statefulset", f"click-counter-{c}", "-n", namespace
                )["spec"]["replicas"]
                == 5
            ),
        )
    wait_for(
        "Ready=False while the new Pods start", lambda: _condition(kubectl, namespace, "Ready") == "False"
    )
    mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter", 10)
    kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=60s")
    scale = json.loads(
        kubectl(
            "get", "--raw", f"/apis/baton.dev/v1alpha1/namespaces/{namespace}/streamapps/click-counter/scale"
        ).stdout
    )
    assert scale["spec"]["replicas"] == 5 and scale["status"]["replicas"] == 5
    assert scale["status"]["selector"] == "baton.dev/app=click-counter,baton.dev/color=blue"


def test_refused_spec_is_stalled_and_never_half_applied(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    """A spec the CRD accepts but the cluster refuses (a bad toleration): nothing applied, Stalled."""
    operator("--no-kafka")
    apply(
        kubectl, example_manifest(namespace, podTemplate={"tolerations": [{"key": "k", "operator": "Maybe"}]})
    )
    kubectl("wait", "--for=condition=Stalled", "sapp/click-counter", "-n", namespace, "--timeout=60s")
    status = get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]
    assert status["phase"] == "Stalled"
    assert "StatefulSet click-counter-blue refused" in status["message"]
    assert "tolerations[0].operator" in status["message"]
    for kind in ("statefulsets", "services", "pdb", "serviceaccounts"):
        names = [i["metadata"]["name"] for i in get_json(kubectl, kind, "-n", namespace)["items"]]
        assert not [n for n in names if n.startswith("click-counter")], (kind, names)
    events = kubectl("get", "events", "-n", namespace, "--field-selector", "reason=SpecRefused").stdout
    assert "click-counter" in events

    # Fixing the spec recovers.
    apply(
        kubectl,
        example_manifest(namespace, podTemplate={"tolerations": [{"key": "k", "operator": "Exists"}]}),
    )
    wait_for("Stalled=False", lambda: _condition(kubectl, namespace, "Stalled") == "False")
    get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)


def test_pods_pass_pod_security_restricted(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    kubectl(
        "label",
        "namespace",
        namespace,
        "pod-security.kubernetes.io/enforce=restricted",
        "pod-security.kubernetes.io/enforce-version=latest",
    )
    operator("--no-kafka")
    apply(kubectl, example_manifest(namespace, replicas=1, standbyReplicas=0))
    # Admission would refuse the Pods (FailedCreate events) if they broke the profile.
    mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter", 2)
    events = kubectl("get", "events", "-n", namespace, "--field-selector", "reason=FailedCreate").stdout
    assert "violates PodSecurity" not in events
