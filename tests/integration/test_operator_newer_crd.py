"""An operator older than its CRD: a spec field it does not know is reported in status, once as
an Event, and nothing is changed or retried with backoff until the operator is upgraded."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml
from batondev.paths import CRD

from baton.testing import wait_for
from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    get_json,
    install_crds,
    try_get_json,
)

pytestmark = pytest.mark.integration

APP = "click-counter"


def _newer_crd() -> dict[str, Any]:
    crd: dict[str, Any] = yaml.safe_load(CRD.read_text())
    spec = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["properties"]["futureField"] = {"type": "string", "description": "A field of a later Baton."}
    return crd


def _stalled(kubectl: KubectlFn, namespace: str) -> dict[str, Any] | None:
    status = (try_get_json(kubectl, "sapp", APP, "-n", namespace) or {}).get("status") or {}
    for cond in status.get("conditions") or []:
        if cond["type"] == "Stalled" and cond.get("reason") == "SpecNotUnderstood":
            return dict(status)
    return None


def test_a_field_from_a_newer_crd_is_reported_not_retried(
    crd_lock: None, operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    op = operator("--no-kafka", "--standalone")
    apply(kubectl, example_manifest(namespace))
    blue = wait_for("blue", lambda: try_get_json(kubectl, "statefulset", f"{APP}-blue", "-n", namespace), 30)
    try:
        kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(_newer_crd()))
        wait_for(
            "the newer CRD served",
            lambda: (
                kubectl(
                    "apply",
                    "--dry-run=server",
                    "-f",
                    "-",
                    input=json.dumps(example_manifest(namespace, futureField="x")),
                    check=False,
                ).returncode
                == 0
            ),
            30,
        )
        apply(kubectl, example_manifest(namespace, futureField="x", replicas=5))
        status = wait_for("Stalled: SpecNotUnderstood", lambda: _stalled(kubectl, namespace), 60)
        assert status["phase"] == "Stalled"
        assert "spec.futureField" in status["message"] and "upgrade the operator" in status["message"]
        ready = next(c for c in status["conditions"] if c["type"] == "Ready")
        assert (ready["status"], ready["reason"]) == ("False", "SpecNotUnderstood")
        # nothing changed meanwhile: the replicas change of the same generation was not applied
        now = get_json(kubectl, "statefulset", f"{APP}-blue", "-n", namespace)
        assert now["spec"]["replicas"] == blue["spec"]["replicas"]
        # more passes: no second Event, no retry with backoff
        passes = op.count("Handler 'on_change' succeeded")
        kubectl("annotate", "sapp", APP, "-n", namespace, "touch=1")
        op.wait_log("Handler 'on_change' succeeded", timeout=30, after=passes)
        events = get_json(
            kubectl,
            "events",
            "-n",
            namespace,
            f"--field-selector=involvedObject.name={APP},reason=SpecNotUnderstood",
        )["items"]
        assert len(events) == 1 and events[0].get("count", 1) == 1, events
        assert "spec.futureField" in events[0]["message"]
        assert op.count("reconcile failed") == 0 and op.count("Traceback") == 0, op.text()[-3000:]
    finally:
        install_crds(kubectl)  # the repository's CRD again, for the tests after this one
