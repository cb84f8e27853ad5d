"""Convergence: idempotent re-apply, a kill mid-reconcile, drift repair (leader election: test_operator_leader.py).

All with real `baton operator` processes against the real API server.
"""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable

import pytest

from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.desired import color_runs
from baton.operator.core.compaction.cronjob import SNAPSHOT_MOUNT
from baton.operator.core.deploy_record import from_status
from baton.operator.core.spec import StreamApp
from baton.testing import wait_for
from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    contains,
    example_manifest,
    get_json,
    try_get_json,
)

pytestmark = pytest.mark.integration

OBJECTS = [
    ("serviceaccount", "click-counter-worker"),
    *[(kind, f"click-counter-{c}") for c in ("blue", "green") for kind in ("service", "pdb", "statefulset")],
]


def _versions(kubectl: KubectlFn, namespace: str) -> dict[str, str]:
    return {
        f"{kind}/{name}": get_json(kubectl, kind, name, "-n", namespace)["metadata"]["resourceVersion"]
        for kind, name in OBJECTS
    }


def _drift(kubectl: KubectlFn, namespace: str) -> list[str]:
    """Differences between the live objects and what the builders want for the live StreamApp."""
    sapp = get_json(kubectl, "sapp", "click-counter", "-n", namespace)
    problems: list[str] = []
    app = StreamApp.from_body(sapp)
    # each color runs the revision the deploy record gives it (blue-green: old active, new idle)
    for obj in desired_objects(app, color_runs(app, from_status(sapp.get("status", {}).get("deploy")))):
        live = try_get_json(kubectl, obj["kind"].lower(), obj["metadata"]["name"], "-n", namespace)
        if live is None:
            problems.append(f"{obj['kind']}/{obj['metadata']['name']} missing")
            continue
        desired = {k: v for k, v in obj.items() if k != "spec"}
        if "spec" in obj:
            desired["spec"] = obj["spec"]
        problems += [f"{obj['kind']}: {d}" for d in contains(live, desired)]
    return problems


_last_drift: list[str] = []


def _converged(kubectl: KubectlFn, namespace: str) -> bool:
    sapp = try_get_json(kubectl, "sapp", "click-counter", "-n", namespace) or {}
    current = sapp.get("status", {}).get("observedGeneration") == sapp.get("metadata", {}).get("generation")
    _last_drift[:] = _drift(kubectl, namespace) if current else ["status not current"]
    return not _last_drift


def _wait_converged(kubectl: KubectlFn, namespace: str, what: str) -> None:
    wait_for(what, lambda: _converged(kubectl, namespace), timeout=60, detail=lambda: f"drift: {_last_drift}")


def test_idempotent_and_converges_after_a_kill(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    first = operator("--no-kafka", name="first")
    apply(kubectl, example_manifest(namespace))
    _wait_converged(kubectl, namespace, "objects match the spec")

    # Re-reconciling an unchanged spec writes nothing.
    before = _versions(kubectl, namespace)
    handled = first.count(r"Handler 'on_change' succeeded")
    kubectl("annotate", "sapp", "click-counter", "-n", namespace, "example.com/touched=1")
    first.wait_log(r"Handler 'on_change' succeeded", after=handled)
    assert _versions(kubectl, namespace) == before

    # A spec change, with the operator killed while it is reconciling it.
    apply(kubectl, example_manifest(namespace, image="ghcr.io/baton-dev/baton:0.2.0", replicas=4))
    time.sleep(0.3)
    first.kill(signal.SIGKILL)
    second = operator("--no-kafka", name="second")
    _wait_converged(kubectl, namespace, "objects match the new spec")
    # Blue-green: the idle color (green) gets the new image, the active one keeps the old until
    # a flip (none here: no Kafka); replicas are not deployed, they scale both colors at once.
    images = {"blue": "ghcr.io/baton-dev/baton:0.1.0", "green": "ghcr.io/baton-dev/baton:0.2.0"}
    for color in ("blue", "green"):
        sts = get_json(kubectl, "statefulset", f"click-counter-{color}", "-n", namespace)
        assert sts["spec"]["replicas"] == 4
        assert sts["spec"]["template"]["spec"]["containers"][0]["image"] == images[color]
    assert get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]["phase"] == "Deploying"

    # A deleted StatefulSet comes back (its watch event triggers a reconcile).
    uid = get_json(kubectl, "statefulset", "click-counter-green", "-n", namespace)["metadata"]["uid"]
    kubectl("delete", "statefulset", "click-counter-green", "-n", namespace, "--cascade=orphan")
    wait_for(
        "green recreated",
        lambda: (
            (try_get_json(kubectl, "statefulset", "click-counter-green", "-n", namespace) or {})
            .get("metadata", {})
            .get("uid", uid)
            != uid
        ),
        timeout=30,
    )
    assert second.proc.poll() is None

    # The recreation is announced as a decision like any other (the first creation was too).
    def created_green() -> int:
        items = json.loads(
            kubectl(
                "get", "events", "-n", namespace, "--field-selector", "reason=Created", "-o", "json"
            ).stdout
        )["items"]
        return sum(
            e.get("count", 1) for e in items if e["message"] == "created StatefulSet/click-counter-green"
        )

    wait_for("two Created events for green", lambda: created_green() >= 2, timeout=30)


def test_strategy_change_prunes_the_other_color(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    operator("--no-kafka")
    apply(kubectl, example_manifest(namespace))
    wait_for(
        "green exists", lambda: try_get_json(kubectl, "statefulset", "click-counter-green", "-n", namespace)
    )
    apply(kubectl, example_manifest(namespace, upgrade={"strategy": "Rolling"}))
    for kind in ("statefulset", "service", "pdb"):
        wait_for(
            f"{kind} green pruned",
            lambda k=kind: try_get_json(kubectl, k, "click-counter-green", "-n", namespace) is None,  # type: ignore[misc]
            timeout=30,
        )
    blue = get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)
    env = {e["name"] for e in blue["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert "BATON_COLOR" not in env
    status = get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]
    wait_for(
        "status has one color",
        lambda: (
            set(get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]["colors"]) == {"blue"}
        ),
    )
    assert status["activeColor"] == "blue"


def test_compaction_on_makes_the_cronjob_and_its_identity_and_off_prunes_them(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    operator("--no-kafka")
    compaction = {"enabled": True, "snapshotStore": "s3a://bucket/baton", "schedule": "@hourly"}
    apply(kubectl, example_manifest(namespace, compaction=compaction))
    kinds = ("cronjob", "serviceaccount", "rolebinding")  # bound to the compactor ClusterRole: no Role
    for kind in kinds:
        wait_for(
            f"{kind} click-counter-compactor",
            lambda k=kind: try_get_json(kubectl, k, "click-counter-compactor", "-n", namespace),  # type: ignore[misc]
            timeout=30,
        )
    job = get_json(kubectl, "cronjob", "click-counter-compactor", "-n", namespace)
    assert (
        job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"]
        == "click-counter-compactor"
    )
    # What the compactor Job writes survives the operator's own status writes.
    patch = {"status": {"compaction": {"findings": 2, "findingKinds": ["cleanup-policy", "segment-ms"]}}}
    kubectl(
        "patch",
        "sapp",
        "click-counter",
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps(patch),
    )
    apply(
        kubectl, example_manifest(namespace, compaction=compaction, replicas=2)
    )  # the operator rewrites status
    wait_for(
        "status of generation 2",
        lambda: (
            get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"].get("observedGeneration")
            == 2
        ),
        timeout=30,
    )
    status = get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"]
    assert status["compaction"]["findings"] == 2, status
    # The workers read the s3a:// store the Job writes; a claim is mounted read-only into them.
    for color in ("blue", "green"):
        sts = get_json(kubectl, "statefulset", f"click-counter-{color}", "-n", namespace)
        env = sts["spec"]["template"]["spec"]["containers"][0]["env"]
        assert {"name": "BATON_SNAPSHOT_STORE", "value": "s3a://bucket/baton"} in env, env
    on_claim = {"enabled": True, "snapshotVolumeClaim": "snaps", "schedule": "@hourly"}
    apply(kubectl, example_manifest(namespace, compaction=on_claim, replicas=2))

    def mounted(color: str) -> bool:
        pod = get_json(kubectl, "statefulset", f"click-counter-{color}", "-n", namespace)["spec"]["template"][
            "spec"
        ]
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        claims = [v["persistentVolumeClaim"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
        return env.get("BATON_SNAPSHOT_STORE") == SNAPSHOT_MOUNT and claims == [
            {"claimName": "snaps", "readOnly": True}
        ]

    for color in ("blue", "green"):
        wait_for(f"the snapshot claim in the {color} workers", lambda c=color: mounted(c) or None, timeout=30)  # type: ignore[misc]
    # Turned off: the CronJob and the identity it ran as are pruned.
    apply(kubectl, example_manifest(namespace, compaction={**compaction, "enabled": False}, replicas=2))
    for kind in kinds:
        wait_for(
            f"{kind} click-counter-compactor pruned",
            lambda k=kind: (
                try_get_json(  # type: ignore[misc]
                    kubectl, k, "click-counter-compactor", "-n", namespace
                )
                is None
            ),
            timeout=30,
        )
