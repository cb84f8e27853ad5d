"""Pod status from the state of its processes (pure: the kubelet's rules, simplified).

The StatefulSet controller counts a replica as ready from the Pod's ``Ready`` condition and
phase ``Running``; the operator reads the same. ``containerID`` is ``podrunner://<pid>``,
so a test (or a chaos run) can find and kill a container's process.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from batondev.podrunner.envresolve import POD_IP

State = Literal["waiting", "running", "terminated"]


@dataclass
class ContainerView:
    """What the pod runner knows about one container right now."""

    name: str
    image: str = ""
    state: State = "waiting"
    reason: str = "ContainerCreating"  # waiting or terminated reason
    message: str = ""
    pid: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    exit_code: int | None = None
    ready: bool = False
    restart_count: int = 0
    last_terminated: dict[str, Any] | None = field(default=None)

    @property
    def ever_started(self) -> bool:
        return self.state != "waiting" or self.last_terminated is not None

    def terminated_state(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "exitCode": self.exit_code if self.exit_code is not None else 0,
            "reason": self.reason or ("Completed" if not self.exit_code else "Error"),
            "startedAt": self.started_at,
            "finishedAt": self.finished_at,
        }
        if self.pid is not None:
            out["containerID"] = f"podrunner://{self.pid}"
        if self.message:
            out["message"] = self.message
        return out

    def to_status(self) -> dict[str, Any]:
        state: dict[str, Any]
        if self.state == "running":
            state = {"running": {"startedAt": self.started_at}}
        elif self.state == "terminated":
            state = {"terminated": self.terminated_state()}
        else:
            waiting: dict[str, Any] = {"reason": self.reason}
            if self.message:
                waiting["message"] = self.message
            state = {"waiting": waiting}
        out: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "imageID": "",
            "ready": self.ready and self.state == "running",
            "started": self.state == "running",
            "restartCount": self.restart_count,
            "state": state,
            "lastState": {"terminated": self.last_terminated} if self.last_terminated else {},
        }
        if self.pid is not None and self.state != "waiting":
            out["containerID"] = f"podrunner://{self.pid}"
        return out


def phase(restart_policy: str, views: list[ContainerView]) -> str:
    """Pending until every container has started once; Succeeded/Failed only when none will restart."""
    if not views or any(not v.ever_started for v in views):
        return "Pending"
    if all(v.state == "terminated" for v in views):
        failed = any(v.exit_code for v in views)
        if restart_policy == "Never":
            return "Failed" if failed else "Succeeded"
        if restart_policy == "OnFailure" and not failed:
            return "Succeeded"
    return "Running"


def _condition(kind: str, ok: bool, now: str, previous: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    status = "True" if ok else "False"
    old = previous.get(kind)
    since = (
        old["lastTransitionTime"]
        if old and old.get("status") == status and old.get("lastTransitionTime")
        else now
    )
    return {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": since}


def pod_status(
    pod: Mapping[str, Any],
    views: list[ContainerView],
    *,
    start_time: str,
    now: str,
    volumes_ready: bool = True,
) -> dict[str, Any]:
    """The Pod's whole ``status`` (conditions keep their transition times when unchanged)."""
    previous = {c["type"]: c for c in (pod.get("status") or {}).get("conditions") or []}
    ready = bool(views) and all(v.state == "running" and v.ready for v in views)
    return {
        "phase": phase(pod["spec"].get("restartPolicy", "Always"), views),
        "conditions": [
            _condition("PodReadyToStartContainers", volumes_ready, now, previous),
            _condition("Initialized", True, now, previous),
            _condition("Ready", ready, now, previous),
            _condition("ContainersReady", ready, now, previous),
            _condition("PodScheduled", True, now, previous),
        ],
        "hostIP": POD_IP,
        "hostIPs": [{"ip": POD_IP}],
        "podIP": POD_IP,
        "podIPs": [{"ip": POD_IP}],
        "startTime": start_time,
        "containerStatuses": [v.to_status() for v in views],
    }
