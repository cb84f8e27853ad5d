"""A blue-green deploy through the operator, end to end, with every part real.

The real API server and controllers, the real broker, `baton operator` as a subprocess, and
the stack's node (kubelet, containerd) running the StatefulSets' Pods from the runtime image
built from the Dockerfile (dev/image), with the env the operator's builders set. Clicks flow in at a steady rate while the spec changes:
the operator updates the idle color, waits until it is ready and caught up, flips, and later
upgrades the old color; a rollback annotation flips back. The read_committed counts at the
end must equal the input, user by user.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from baton.testing import wait_for
from tests.conftest import Node
from tests.support.deploy import Clicks, bluegreen_manifest, counts, status
from tests.support.operator import KubectlFn, apply, get_json, install_crds, start_operator

pytestmark = pytest.mark.e2e


def phase_events(kubectl: KubectlFn, namespace: str) -> list[str]:
    """The phases the operator announced, in order (one "Phase" Event per transition)."""
    items = get_json(kubectl, "events", "-n", namespace, "--field-selector", "reason=Phase")["items"]
    items.sort(key=lambda e: (e.get("firstTimestamp") or e.get("eventTime") or "", e["metadata"]["name"]))
    return [e["message"].split(":", 1)[0].split(" -> ")[1] for e in items]


def reasons(kubectl: KubectlFn, namespace: str) -> set[str]:
    return {e["reason"] for e in get_json(kubectl, "events", "-n", namespace)["items"]}


def test_blue_green_deploy_through_the_operator(  # noqa: PLR0917 (fixtures)
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
    clicks_topic, counts_topic = new_topic(partitions=4), new_topic(partitions=4)
    manifest = bluegreen_manifest(
        namespace,
        unique_name,
        {"bootstrapServers": node.kafka_bootstrap},
        (clicks_topic, counts_topic),
        image=node_runtime_image,
    )
    manifest["spec"]["podTemplate"]["tolerations"] = [node.toleration]
    producer = Clicks(kafka_bootstrap, clicks_topic)
    operator = start_operator(tmp_path, namespace, kube.kubeconfig, "operator")
    try:
        apply(kubectl, manifest)
        kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=100s")
        assert status(kubectl, namespace)["activeColor"] == "blue"
        pod = get_json(kubectl, "pod", "click-counter-blue-0", "-n", namespace)
        assert pod["spec"]["nodeName"] == node.name
        assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
        producer.batch(500)
        wait_for("blue's counts", lambda: counts(kafka_bootstrap, counts_topic) == dict(producer.sent), 60)

        with producer:  # steady input through the deploy and the rollback
            time.sleep(1)
            manifest["spec"]["podTemplate"]["env"][-1]["value"] = "v2"
            apply(kubectl, manifest)
            wait_for(
                "green active and Stable",
                lambda: (
                    (st := status(kubectl, namespace)).get("activeColor") == "green"
                    and st.get("phase") == "Stable"
                ),
                timeout=150,
                every=0.3,
            )
            table = kubectl("get", "sapp", "click-counter", "-n", namespace).stdout
            assert table.splitlines()[1].split()[1] == "green", table
            st = status(kubectl, namespace)
            flip = st["lastFlip"]
            assert flip["committed"] and flip["to"] == "green" and flip["epoch"] >= 1
            assert set(flip["cut"]) == {f"{clicks_topic}:{p}" for p in range(4)}
            assert 0 < flip["pauseMs"] < 5000
            # blue keeps v1 as the rollback target, then gets v2 after the delay
            deploy = st["deploy"]
            assert deploy["colors"]["blue"]["revision"] != deploy["colors"]["green"]["revision"]
            wait_for(
                "blue upgraded and Ready",
                lambda: (
                    (s := status(kubectl, namespace))["deploy"]["colors"]["blue"]
                    == s["deploy"]["colors"]["green"]
                    and any(c["type"] == "Ready" and c["status"] == "True" for c in s["conditions"])
                ),
                timeout=120,
                every=0.5,
            )
            # Rollback is a flip back.
            kubectl("annotate", "sapp", "click-counter", "-n", namespace, "baton.dev/rollback=true")
            wait_for(
                "blue active again",
                lambda: (
                    (s := status(kubectl, namespace)).get("activeColor") == "blue"
                    and s.get("lastFlip", {}).get("to") == "blue"
                ),
                timeout=60,
                every=0.3,
            )
            time.sleep(1)
        annotations = get_json(kubectl, "sapp", "click-counter", "-n", namespace)["metadata"].get(
            "annotations", {}
        )
        assert "baton.dev/rollback" not in annotations

        wait_for(
            "exact counts",
            lambda: counts(kafka_bootstrap, counts_topic) == dict(producer.sent),
            timeout=90,
            every=1,
        )
        phases = phase_events(kubectl, namespace)
        for expected in ("Deploying", "Promoting", "Flipping", "Stable", "RollingBack"):
            assert expected in phases, phases
        assert phases.index("Promoting") < phases.index("Flipping") < phases.index("RollingBack")
        assert {"DeployStarted", "FlipStarted", "Promoted", "StandbyUpgraded", "RolledBack"} <= reasons(
            kubectl, namespace
        )
        # one commit per flip in the control topic: the deploy's and the rollback's
        assert status(kubectl, namespace)["lastFlip"]["epoch"] == flip["epoch"] + 1
    except BaseException:
        print(operator.text()[-6000:])
        print(kubectl("logs", "click-counter-blue-0", "-n", namespace, "--tail=60", check=False).stdout)
        raise
    finally:
        kubectl("delete", "sapp", "click-counter", "-n", namespace, "--timeout=60s", check=False)
        operator.kill()
    assert json.dumps(dict(producer.sent))
