"""kstatus status computation, from StatefulSet states to conditions and phase."""

from __future__ import annotations

import datetime
from typing import Any

import pytest
from pydantic import ValidationError

from baton.operator.core.builders.statefulset import spec_hash
from baton.operator.core.compaction.jobs import last_result, result_of
from baton.operator.core.spec import StreamApp
from baton.operator.core.status import (
    Observed,
    color_readiness,
    compute_status,
    not_understood_status,
    pods_failing,
    spec_problems,
)
from tests.support.samples import app, example_body, sts

pytestmark = pytest.mark.unit

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
T1 = T0 + datetime.timedelta(minutes=5)


def conditions(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_ready_false_from_the_first_reconcile() -> None:
    status = compute_status(
        app(), Observed(statefulsets={"blue": None, "green": None}), spec_hash(app().spec)
    )
    assert conditions(status) == {
        "Ready": "False",
        "Reconciling": "True",
        "Stalled": "False",
        "StandbyReady": "False",
    }
    assert status["phase"] == "Pending"
    assert status["observedGeneration"] == 3
    assert all(c["observedGeneration"] == 3 for c in status["conditions"])


def test_ready_when_every_color_is_rolled_out() -> None:
    observed = Observed(statefulsets={"blue": sts(3), "green": sts(3)}, lag={"blue": 12, "green": 40})
    status = compute_status(app(), observed, spec_hash(app().spec))
    assert conditions(status) == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
        "StandbyReady": "True",
    }
    assert status["phase"] == "Stable"
    assert status["activeColor"] == "blue"
    assert status["replicas"] == 3 and status["readyReplicas"] == 3
    assert status["selector"] == "baton.dev/app=click-counter,baton.dev/color=blue"
    assert status["lag"] == 12
    assert status["colors"]["green"]["lag"] == 40
    assert status["colors"]["green"]["applicationId"] == "click-counter-green"


def test_ready_follows_the_active_color_and_the_idle_one_is_standby_ready() -> None:
    """Issue 18: the standby upgrade after a flip must not turn the app not-Ready."""
    observed = Observed(statefulsets={"blue": sts(3), "green": sts(2)})
    status = compute_status(app(), observed, spec_hash(app().spec))
    assert conditions(status) == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
        "StandbyReady": "False",
    }
    standby = by_type(status)["StandbyReady"]
    assert (standby["reason"], standby["message"]) == ("NotReady", "green: 2/3 Pods ready")
    assert status["phase"] == "Stable"

    observed = Observed(statefulsets={"blue": sts(2), "green": sts(3)})
    status = compute_status(app(), observed, spec_hash(app().spec))
    assert conditions(status)["Ready"] == "False" and conditions(status)["StandbyReady"] == "True"
    assert status["phase"] == "Deploying" and "blue: 2/3 Pods ready" in status["message"]


def crash_looping_pod(name: str, reason: str = "CrashLoopBackOff") -> dict[str, Any]:
    """A Pod as the kubelet reports one whose worker exits at start (abridged from a real one)."""
    return {
        "metadata": {"name": name},
        "status": {
            "phase": "Running",
            "containerStatuses": [
                {
                    "name": "worker",
                    "ready": False,
                    "restartCount": 4,
                    "state": {"waiting": {"reason": reason, "message": "back-off 1m20s restarting"}},
                    "lastState": {
                        "terminated": {
                            "exitCode": 2,
                            "reason": "Error",
                            "message": "baton: error: topology module 'app' not found\n",
                        }
                    },
                }
            ],
        },
    }


def test_pods_failing_names_the_pod_reason_restarts_and_last_exit() -> None:
    healthy = {
        "metadata": {"name": "x-blue-0"},
        "status": {"containerStatuses": [{"name": "worker", "state": {"running": {}}}]},
    }
    starting = {
        "metadata": {"name": "x-blue-1"},
        "status": {
            "containerStatuses": [{"name": "worker", "state": {"waiting": {"reason": "ContainerCreating"}}}]
        },
    }
    assert pods_failing([healthy, starting]) is None
    why = pods_failing([healthy, crash_looping_pod("x-green-1"), crash_looping_pod("x-green-0")])
    assert why == (
        "Pod x-green-0 container worker CrashLoopBackOff (restarts 4), exit code 2: "
        "baton: error: topology module 'app' not found; "
        "Pod x-green-1 container worker CrashLoopBackOff (restarts 4), exit code 2: "
        "baton: error: topology module 'app' not found"
    )
    pulling = crash_looping_pod("x-green-2", "ImagePullBackOff")
    pulling["status"]["containerStatuses"][0]["lastState"] = {}
    assert pods_failing([pulling]) == (
        "Pod x-green-2 container worker ImagePullBackOff (restarts 4), back-off 1m20s restarting"
    )


def test_a_crash_looping_idle_color_is_stalled_while_the_active_one_stays_ready() -> None:
    """Issue 18: Argo CD shows Degraded with the reason, not Progressing forever."""
    why = "Pod click-counter-green-0 container worker CrashLoopBackOff (restarts 4), exit code 2: boom"
    observed = Observed(statefulsets={"blue": sts(3), "green": sts(2)}, failing={"green": why})
    status = compute_status(app(), observed, spec_hash(app().spec))
    assert conditions(status) == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "True",
        "StandbyReady": "False",
    }
    assert by_type(status)["Stalled"]["reason"] == "PodsFailing"
    assert status["message"] == f"Pods failing: green (standby): {why}"
    assert by_type(status)["StandbyReady"]["reason"] == "PodsFailing"

    active = Observed(statefulsets={"blue": sts(2), "green": sts(3)}, failing={"blue": why})
    status = compute_status(app(), active, spec_hash(app().spec))
    assert conditions(status)["Ready"] == "False" and conditions(status)["Stalled"] == "True"
    assert status["message"] == f"Pods failing: blue: {why}"


def test_one_color_has_no_standby_to_wait_for() -> None:
    rolling = app(upgrade={"strategy": "Rolling"})
    status = compute_status(rolling, Observed(statefulsets={"blue": sts(3)}), spec_hash(rolling.spec))
    assert conditions(status) == {
        "Ready": "True",
        "Reconciling": "False",
        "Stalled": "False",
        "StandbyReady": "True",
    }
    assert by_type(status)["StandbyReady"]["reason"] == "NoStandbyColor"


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        (sts(3, want_hash="old"), "not updated to the current spec"),
        (sts(3, generation=2, observed=1), "has not observed"),
        (sts(3, current="r1", update="r2"), "Pods updated"),
        (sts(3, replicas=2), "2/3 Pods exist"),
    ],
)
def test_color_readiness_reasons(state: dict[str, Any], reason: str) -> None:
    result = color_readiness(state, 3, spec_hash(app().spec))
    assert not result.ready
    assert reason in result.message


def test_stalled_on_a_refused_spec() -> None:
    observed = Observed(statefulsets={"blue": sts(3), "green": sts(3)}, error="StatefulSet x refused: bad")
    status = compute_status(app(), observed, spec_hash(app().spec))
    assert conditions(status) | {"StandbyReady": "?"} == {
        "Ready": "False",
        "Reconciling": "False",
        "Stalled": "True",
        "StandbyReady": "?",
    }
    assert status["phase"] == "Stalled"
    assert status["message"] == "StatefulSet x refused: bad"


def test_paused() -> None:
    sample = app(paused=True)
    status = compute_status(
        sample, Observed(statefulsets={"blue": sts(3), "green": sts(3)}), spec_hash(sample.spec)
    )
    assert status["phase"] == "Paused"
    assert conditions(status)["Reconciling"] == "False"


def test_transition_time_kept_while_status_unchanged() -> None:
    want = spec_hash(app().spec)
    first = compute_status(app(), Observed(statefulsets={"blue": sts(1), "green": sts(1)}), want, now=T0)
    again = compute_status(
        app(), Observed(statefulsets={"blue": sts(2), "green": sts(2)}), want, first["conditions"], now=T1
    )
    ready = compute_status(
        app(), Observed(statefulsets={"blue": sts(3), "green": sts(3)}), want, again["conditions"], now=T1
    )
    assert again["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:00:00Z"
    assert ready["conditions"][0]["lastTransitionTime"] == "2026-01-01T00:05:00Z"


def test_active_color_follows_observation() -> None:
    observed = Observed(statefulsets={"blue": sts(3), "green": sts(1, replicas=1)}, active_color="green")
    status = compute_status(app(), observed, spec_hash(app().spec))
    assert status["activeColor"] == "green"
    assert status["selector"].endswith("baton.dev/color=green")
    assert status["replicas"] == 1


def test_scaled_to_zero_is_ready() -> None:
    sample = app(replicas=0, standbyReplicas=0)
    want = spec_hash(sample.spec)
    observed = Observed(
        statefulsets={
            "blue": sts(0, replicas=0, want_hash=want, current="", update="r1"),
            "green": sts(0, replicas=0, want_hash=want),
        }
    )
    assert conditions(compute_status(sample, observed, want))["Ready"] == "True"


def test_the_newest_finished_compaction_job_decides_whether_compaction_failed() -> None:
    def job(name: str, kind: str | None, at: str, reason: str = "") -> dict[str, Any]:
        conditions = (
            []
            if kind is None
            else [
                {"type": kind, "status": "True", "lastTransitionTime": at, "reason": reason, "message": "m"}
            ]
        )
        return {"metadata": {"name": name}, "status": {"conditions": conditions}}

    ok = job("c-1", "Complete", "2026-11-24T03:20:00Z")
    failed = job("c-2", "Failed", "2026-11-25T03:40:00Z", "BackoffLimitExceeded")
    running = job("c-3", None, "")
    assert result_of(running) is None
    latest = last_result([ok, failed, running])
    assert latest is not None and latest.failed and latest.job == "c-2"
    assert latest.reason == "BackoffLimitExceeded"
    retried = job("manual", "Complete", "2026-11-25T04:00:00Z")  # a person reran it by hand
    latest = last_result([ok, failed, retried])
    assert latest is not None and not latest.failed and latest.job == "manual"
    assert last_result([running]) is None
    # a Failed condition that is not True (a Job's FailureTarget era) is not a failure
    pending = job("c-4", "Failed", "2026-11-26T00:00:00Z")
    pending["status"]["conditions"][0]["status"] = "False"
    assert result_of(pending) is None


def test_a_spec_from_a_newer_crd_is_reported_and_what_the_operator_wrote_is_kept() -> None:
    body = example_body()
    body["metadata"] |= {"generation": 7, "uid": "u"}
    body["spec"]["futureField"] = "x"
    body["spec"]["upgrade"] = {"strategy": "Canary"}
    body["status"] = {
        "activeColor": "green",
        "deploy": {"revision": "abc"},
        "compaction": {"findings": 1},
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Stable",
                "lastTransitionTime": "2026-11-01T00:00:00Z",
            },
            {
                "type": "StandbyReady",
                "status": "True",
                "reason": "x",
                "lastTransitionTime": "2026-11-01T00:00:00Z",
            },
        ],
    }
    with pytest.raises(ValidationError) as caught:
        StreamApp.from_body(body)
    problems = spec_problems(caught.value)
    assert any(p.startswith("spec.futureField: Extra inputs are not permitted") for p in problems), problems
    assert any(p.startswith("spec.upgrade.strategy:") for p in problems), problems
    status = not_understood_status(
        body, problems, "0.1.0", datetime.datetime(2026, 11, 25, tzinfo=datetime.UTC)
    )
    assert status["phase"] == "Stalled" and status["observedGeneration"] == 7
    assert "spec.futureField" in status["message"] and "upgrade the operator" in status["message"]
    by_type = {c["type"]: c for c in status["conditions"]}
    assert (by_type["Stalled"]["status"], by_type["Stalled"]["reason"]) == ("True", "SpecNotUnderstood")
    assert by_type["Ready"]["status"] == "False"
    assert by_type["Ready"]["lastTransitionTime"] == "2026-11-25T00:00:00Z"  # it changed
    assert by_type["StandbyReady"]["lastTransitionTime"] == "2026-11-01T00:00:00Z"  # not ours to touch
    # the deploy record and the active color survive for the upgraded operator; the Job's summary is not re-owned
    assert status["activeColor"] == "green" and status["deploy"] == {"revision": "abc"}
    assert "compaction" not in status
