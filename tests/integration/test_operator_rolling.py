"""upgrade.strategy Rolling on the real API server: one Pod at a time, each after the last is Ready.

No kubelet here: the test plays it (mark_pods_ready), which lets it hold a restarted Pod
un-Ready and check that the operator waits before it restarts the next one.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from baton.testing import wait_for
from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    get_json,
    mark_pods_ready,
)

pytestmark = pytest.mark.integration

SELECTOR = "baton.dev/app=click-counter"


def _pods(kubectl: KubectlFn, namespace: str) -> dict[str, dict[str, Any]]:
    items = get_json(kubectl, "pods", "-n", namespace, "-l", SELECTOR)["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


def _revision(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"].get("controller-revision-hash"))


def test_rolling_restarts_one_pod_at_a_time(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    operator("--no-kafka")
    manifest = example_manifest(namespace, replicas=2, standbyReplicas=0, upgrade={"strategy": "Rolling"})
    apply(kubectl, manifest)
    mark_pods_ready(kubectl, namespace, SELECTOR, 2)
    kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=60s")
    sts = get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)
    assert sts["spec"]["updateStrategy"] == {"type": "OnDelete"}
    old = {n: p["metadata"]["uid"] for n, p in _pods(kubectl, namespace).items()}

    manifest["spec"]["image"] = "ghcr.io/baton-dev/baton:0.2.0"
    apply(kubectl, manifest)

    # The highest ordinal goes first; its replacement runs the new revision.
    def replaced(name: str) -> dict[str, Any] | None:
        pod = _pods(kubectl, namespace).get(name)
        return pod if pod is not None and pod["metadata"]["uid"] != old[name] else None

    first = wait_for("click-counter-blue-1 recreated", lambda: replaced("click-counter-blue-1"), timeout=60)
    update = get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)["status"][
        "updateRevision"
    ]
    assert _revision(first) == update
    assert get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]["phase"] == "Deploying"
    # While it is not Ready (restoring), the other Pod is left alone (the loop looks every 2 s).
    time.sleep(6)
    assert _pods(kubectl, namespace)["click-counter-blue-0"]["metadata"]["uid"] == old["click-counter-blue-0"]

    # Ready: the next one goes.
    mark_pods_ready(kubectl, namespace, SELECTOR, 2)
    second = wait_for("click-counter-blue-0 recreated", lambda: replaced("click-counter-blue-0"), timeout=60)
    assert _revision(second) == update
    mark_pods_ready(kubectl, namespace, SELECTOR, 2)
    wait_for(
        "Stable",
        lambda: get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]["phase"] == "Stable",
        timeout=60,
    )
    events = kubectl("get", "events", "-n", namespace, "--field-selector", "reason=PodRestarted").stdout
    assert "click-counter-blue-1" in events and "click-counter-blue-0" in events
