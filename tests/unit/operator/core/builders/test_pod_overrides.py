"""What a platform team tunes on the worker Pods (spec.podTemplate, spec.worker.logLevel,
spec.restartNonce), as the StatefulSet builder renders it, and claim templates kept as live."""

from __future__ import annotations

from typing import Any

import pytest

from baton.operator.core.builders.statefulset import statefulset
from baton.operator.core.constants import ANNOTATION_RESTART_NONCE
from baton.operator.reconcile import keep_claim_templates
from tests.support.samples import app

pytestmark = pytest.mark.unit


def _worker(sts: dict[str, Any]) -> dict[str, Any]:
    return dict(sts["spec"]["template"]["spec"]["containers"][0])


def _env(sts: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in _worker(sts)["env"]}


def test_security_contexts_merge_over_the_restricted_defaults() -> None:
    plain = statefulset(app(), "blue")
    tuned = statefulset(
        app(
            podTemplate={
                "securityContext": {"fsGroup": 2000, "supplementalGroups": [3000]},
                "containerSecurityContext": {"readOnlyRootFilesystem": False},
            }
        ),
        "blue",
    )
    pod, plain_pod = tuned["spec"]["template"]["spec"], plain["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        **plain_pod["securityContext"],
        "fsGroup": 2000,
        "supplementalGroups": [3000],
    }
    worker = _worker(tuned)["securityContext"]
    assert worker == {**_worker(plain)["securityContext"], "readOnlyRootFilesystem": False}
    assert worker["capabilities"] == {"drop": ["ALL"]} and worker["allowPrivilegeEscalation"] is False


def test_probe_timing_is_tuned_and_a_startup_probe_added_only_when_set() -> None:
    plain = _worker(statefulset(app(), "blue"))
    assert "startupProbe" not in plain
    worker = _worker(
        statefulset(
            app(
                podTemplate={
                    "probes": {
                        "liveness": {"periodSeconds": 30, "failureThreshold": 10},
                        "readiness": {"initialDelaySeconds": 5, "successThreshold": 2},
                        "startup": {"failureThreshold": 120},
                    }
                }
            ),
            "blue",
        )
    )
    assert worker["livenessProbe"] == {**plain["livenessProbe"], "periodSeconds": 30, "failureThreshold": 10}
    assert worker["readinessProbe"] == {
        **plain["readinessProbe"],
        "initialDelaySeconds": 5,
        "successThreshold": 2,
    }
    assert worker["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert worker["startupProbe"]["failureThreshold"] == 120


def test_statefulset_and_claim_metadata_and_the_operators_labels_win() -> None:
    sts = statefulset(
        app(
            podTemplate={
                "statefulSet": {"labels": {"team": "payments"}, "annotations": {"owner": "a@b"}},
                "persistentVolumeClaim": {"labels": {"backup": "daily"}, "annotations": {"snap": "yes"}},
            }
        ),
        "blue",
    )
    plain = statefulset(app(), "blue")
    assert sts["metadata"]["labels"] == {**plain["metadata"]["labels"], "team": "payments"}
    assert sts["metadata"]["annotations"]["owner"] == "a@b"
    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"] == {
        "name": "state",
        "labels": {"backup": "daily"},
        "annotations": {"snap": "yes"},
    }


def test_restart_nonce_and_log_level_reach_the_pods_only_when_set() -> None:
    plain = statefulset(app(), "blue")
    assert ANNOTATION_RESTART_NONCE not in (plain["spec"]["template"]["metadata"].get("annotations") or {})
    assert "BATON_LOG_LEVEL" not in _env(plain)  # the worker's default: Pods as they ran
    sts = statefulset(app(restartNonce="2026-11-29", worker={"logLevel": "debug"}), "blue")
    assert sts["spec"]["template"]["metadata"]["annotations"][ANNOTATION_RESTART_NONCE] == "2026-11-29"
    assert _env(sts)["BATON_LOG_LEVEL"] == "debug"


def test_an_existing_statefulset_keeps_its_claim_templates() -> None:
    """The API server never lets them change: claim metadata added later must not make every
    update of the app a refusal."""
    desired = statefulset(app(podTemplate={"persistentVolumeClaim": {"labels": {"backup": "daily"}}}), "blue")
    live = statefulset(app(), "blue")
    live["spec"]["volumeClaimTemplates"][0]["status"] = {"phase": "Pending"}
    kept = keep_claim_templates(desired, live)
    assert kept["spec"]["volumeClaimTemplates"] == [
        {k: v for k, v in c.items() if k != "status"} for c in live["spec"]["volumeClaimTemplates"]
    ]
    assert kept["spec"]["template"] == desired["spec"]["template"]
    assert keep_claim_templates(desired, None) is desired  # a new StatefulSet gets the metadata


def test_claims_smaller_than_the_state_size_are_expanded_alone() -> None:
    from baton.operator.claims import expansion, undersized

    def claim(name: str, storage: str) -> dict[str, Any]:
        return {"metadata": {"name": name}, "spec": {"resources": {"requests": {"storage": storage}}}}

    claims = [
        claim("state-a-blue-1", "1Gi"),
        claim("state-a-blue-0", "1024Mi"),
        claim("state-a-green-0", "4Gi"),
    ]
    assert undersized(claims, "2Gi") == ["state-a-blue-0", "state-a-blue-1"]
    assert undersized(claims, "1Gi") == []
    assert expansion("state-a-blue-0", "ns", "2Gi")["spec"] == {"resources": {"requests": {"storage": "2Gi"}}}
