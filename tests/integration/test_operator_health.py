"""Honest health on the real API server: Ready follows the active color, the idle color has its
own ``StandbyReady``, Pods that cannot start make the app Stalled, and a deleted active
StatefulSet comes back at its own revision (issue 18).

kube-controller-manager creates the Pods; the test plays kubelet by writing Pod status, as
:func:`mark_pods_ready` does, including the container states of a crash loop.
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
    report_pod_status,
    try_get_json,
)

pytestmark = pytest.mark.integration

OLD_IMAGE = "ghcr.io/baton-dev/baton:0.1.0"
NEW_IMAGE = "ghcr.io/baton-dev/baton:0.2.0"


def conditions(kubectl: KubectlFn, namespace: str) -> dict[str, dict[str, Any]]:
    sapp = try_get_json(kubectl, "sapp", "click-counter", "-n", namespace) or {}
    return {c["type"]: c for c in (sapp.get("status") or {}).get("conditions") or []}


def crash_loop(kubectl: KubectlFn, namespace: str, selector: str, expect: int) -> list[str]:
    """Report the Pods' worker container as a kubelet does after it exited at start, again and again."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    worker = {
        "name": "worker",
        "image": OLD_IMAGE,
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": 5,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 2m40s"}},
        "lastState": {
            "terminated": {
                "exitCode": 1,
                "reason": "Error",
                "message": "config: BATON_TOPOLOGY: module 'app' not found",
                "startedAt": now,
                "finishedAt": now,
            }
        },
    }
    status = {
        "phase": "Running",
        "conditions": [
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "False", "lastTransitionTime": now},
            {"type": "Ready", "status": "False", "lastTransitionTime": now},
        ],
        "containerStatuses": [worker],
    }
    return report_pod_status(kubectl, namespace, selector, expect, status)


def test_a_crash_looping_standby_is_stalled_while_the_active_color_stays_ready(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    operator("--no-kafka")
    apply(kubectl, example_manifest(namespace))
    mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter,baton.dev/color=blue", 3)
    crash_loop(kubectl, namespace, "baton.dev/app=click-counter,baton.dev/color=green", 3)

    def stalled() -> dict[str, dict[str, Any]] | None:
        found = conditions(kubectl, namespace)
        return found if found.get("Stalled", {}).get("status") == "True" else None

    found = wait_for("Stalled=True for the crash-looping standby", stalled, timeout=60)
    assert found["Stalled"]["reason"] == "PodsFailing"
    assert (
        "green (standby): Pod click-counter-green-0 container worker CrashLoopBackOff (restarts 5)"
        in (found["Stalled"]["message"])
    )
    assert "module 'app' not found" in found["Stalled"]["message"]
    assert (found["Ready"]["status"], found["Ready"]["reason"]) == ("True", "ActiveColorReady")
    assert (found["StandbyReady"]["status"], found["StandbyReady"]["reason"]) == ("False", "PodsFailing")
    # kubectl wait sees both: the active color serves, and the app needs a person
    kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=5s")
    kubectl("wait", "--for=condition=Stalled", "sapp/click-counter", "-n", namespace, "--timeout=5s")
    events = kubectl("get", "events", "-n", namespace, "--field-selector", "reason=Stalled").stdout
    assert "CrashLoopBackOff" in events

    # the standby recovers: Stalled clears and StandbyReady turns True, with no deploy in between
    mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter,baton.dev/color=green", 3)
    wait_for(
        "StandbyReady=True and Stalled=False",
        lambda: (
            conditions(kubectl, namespace).get("StandbyReady", {}).get("status") == "True"
            and conditions(kubectl, namespace)["Stalled"]["status"] == "False"
        ),
        timeout=60,
    )
    assert get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]["phase"] == "Stable"


def test_a_deleted_active_statefulset_is_recreated_at_its_own_revision_mid_deploy(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    operator("--no-kafka")
    apply(kubectl, example_manifest(namespace))
    mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter", 6)
    kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=60s")

    def image(color: str) -> str | None:
        sts = try_get_json(kubectl, "statefulset", f"click-counter-{color}", "-n", namespace)
        return None if sts is None else str(sts["spec"]["template"]["spec"]["containers"][0]["image"])

    apply(kubectl, example_manifest(namespace, image=NEW_IMAGE))

    def deploying() -> dict[str, Any] | None:
        # the pass applies green's StatefulSet first and writes the status after it: wait for both
        status = get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]
        target = (status.get("deploy") or {}).get("target")
        return status if image("green") == NEW_IMAGE and target is not None else None

    before = wait_for("the deploy gives green the new image and says so", deploying)
    assert before["activeColor"] == "blue" and before["deploy"]["target"] == "green"
    old_uid = get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)["metadata"]["uid"]

    kubectl("delete", "statefulset", "click-counter-blue", "-n", namespace, "--wait=true")

    def recreated() -> dict[str, Any] | None:
        sts = try_get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)
        return sts if sts is not None and sts["metadata"]["uid"] != old_uid else None

    sts = wait_for("blue recreated", recreated, timeout=30)
    assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == OLD_IMAGE, (
        "the active color must come back at its own revision, not skip the deploy's promotion gate"
    )
    time.sleep(2)  # a few more passes: nothing moves blue to the new revision without a flip
    after = get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]
    assert image("blue") == OLD_IMAGE and image("green") == NEW_IMAGE
    assert after["activeColor"] == "blue" and after["deploy"]["target"] == "green"
    assert after["deploy"]["colors"]["blue"] == before["deploy"]["colors"]["blue"]
    assert sorted(after["deploy"]["created"]) == ["blue", "green"]
    assert after["phase"] in ("Deploying", "Promoting")
