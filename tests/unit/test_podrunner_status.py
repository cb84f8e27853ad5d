"""The pod runner's status computation, probe thresholds and restart back-off."""

from __future__ import annotations

from typing import Any

import pytest
from batondev.podrunner.probes import Tracker
from batondev.podrunner.process import backoff, exit_code
from batondev.podrunner.status import ContainerView, phase, pod_status

pytestmark = pytest.mark.unit


def running(name: str = "w", ready: bool = True, restarts: int = 0) -> ContainerView:
    return ContainerView(
        name=name, state="running", reason="", pid=42, started_at="T1", ready=ready, restart_count=restarts
    )


def terminated(code: int, name: str = "w") -> ContainerView:
    return ContainerView(
        name=name, state="terminated", exit_code=code, reason="Error" if code else "Completed", pid=7
    )


@pytest.mark.parametrize(
    ("policy", "views", "expected"),
    [
        ("Always", [], "Pending"),
        ("Always", [ContainerView(name="w")], "Pending"),
        ("Always", [running(), ContainerView(name="x")], "Pending"),
        ("Always", [running()], "Running"),
        ("Always", [terminated(0)], "Running"),  # it will be restarted
        ("Never", [terminated(0)], "Succeeded"),
        ("Never", [terminated(0), terminated(1, "x")], "Failed"),
        ("OnFailure", [terminated(0)], "Succeeded"),
        ("OnFailure", [terminated(2)], "Running"),
        ("Never", [terminated(0), running("x")], "Running"),
    ],
)
def test_phase(policy: str, views: list[ContainerView], expected: str) -> None:
    assert phase(policy, views) == expected


def test_waiting_after_a_crash_counts_as_started() -> None:
    view = ContainerView(name="w", reason="CrashLoopBackOff", last_terminated={"exitCode": 1})
    assert phase("Always", [view]) == "Running"


POD: dict[str, Any] = {"metadata": {"name": "p"}, "spec": {"restartPolicy": "Always"}}


def test_pod_status_ready_and_transition_times() -> None:
    status = pod_status(POD, [running(ready=False)], start_time="T0", now="T5")
    conditions = {c["type"]: c for c in status["conditions"]}
    assert status["phase"] == "Running"
    assert conditions["Ready"]["status"] == "False"
    assert status["podIP"] == "127.0.0.1"
    assert status["containerStatuses"][0]["containerID"] == "podrunner://42"
    assert status["containerStatuses"][0]["state"] == {"running": {"startedAt": "T1"}}

    later = pod_status({**POD, "status": status}, [running(ready=True)], start_time="T0", now="T9")
    conditions = {c["type"]: c for c in later["conditions"]}
    assert conditions["Ready"] == {
        "type": "Ready",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": "T9",
    }
    assert conditions["PodScheduled"]["lastTransitionTime"] == "T5"  # unchanged: kept
    # nothing changed: an identical status, so the runner writes nothing
    assert pod_status({**POD, "status": later}, [running(ready=True)], start_time="T0", now="T20") == later


def test_container_status_after_a_crash() -> None:
    view = ContainerView(
        name="w", image="img", reason="CrashLoopBackOff", message="back-off 2s", restart_count=3
    )
    view.last_terminated = terminated(137).terminated_state()
    out = view.to_status()
    assert out["state"] == {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 2s"}}
    assert out["lastState"]["terminated"]["exitCode"] == 137
    assert out["ready"] is False and out["restartCount"] == 3


def test_ready_only_while_running() -> None:
    view = terminated(1)
    view.ready = True
    assert view.to_status()["ready"] is False


def test_readiness_tracker_thresholds() -> None:
    tracker = Tracker(
        {"initialDelaySeconds": 2, "periodSeconds": 1, "successThreshold": 2, "failureThreshold": 2},
        healthy=False,
        started=100.0,
    )
    assert not tracker.due(101.0) and tracker.due(102.0)
    tracker.record(True, 102.0)
    assert not tracker.healthy and tracker.next_at == 103.0
    tracker.record(True, 103.0)
    assert tracker.healthy
    tracker.record(False, 104.0)
    assert tracker.healthy  # one failure is below the threshold
    tracker.record(False, 105.0)
    assert not tracker.healthy


def test_liveness_starts_healthy() -> None:
    tracker = Tracker({}, healthy=True, started=0.0)
    for t in range(3):
        assert tracker.healthy
        tracker.record(False, float(t))
    assert not tracker.healthy  # default failureThreshold 3


def test_backoff_and_exit_codes() -> None:
    assert [backoff(n, 1.0, 30.0) for n in range(7)] == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0]
    assert exit_code(-9) == 137 and exit_code(-15) == 143 and exit_code(3) == 3
