"""The Node the pod runner stands for: registration, heartbeat and removal.

The Node carries the taint ``podrunner.baton.dev/local=true:NoSchedule`` unless the runner
was started with ``--untainted``: the API server is shared by tests that run in parallel,
and an untainted Node would make kube-scheduler place *their* Pods here too. By default the
runner binds the Pods it selected itself (``runner``), which ignores taints as a
``nodeName`` does. With ``--scheduler`` kube-scheduler binds instead: then only Pods that
tolerate the taint land here (or any Pod, with ``--untainted``).

Heartbeat is the kubelet's: a Lease in ``kube-node-lease`` renewed every 10 s, and the
Ready condition's ``lastHeartbeatTime`` refreshed every minute.
"""

from __future__ import annotations

import datetime
import os
import platform
import threading
from typing import Any

from batondev.podrunner.envresolve import POD_IP
from batondev.podrunner.kubeapi import Api

TAINT_KEY = "podrunner.baton.dev/local"
LABEL = "podrunner.baton.dev/node"
LEASE_NAMESPACE = "kube-node-lease"
LEASE_SECONDS = 40


def _now(micro: bool = False) -> str:
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 8 << 30


def capacity() -> dict[str, str]:
    return {
        "cpu": str(os.cpu_count() or 1),
        "memory": f"{memory_bytes() // 1024}Ki",
        "pods": "250",
        "ephemeral-storage": "100Gi",
    }


def node_object(name: str, *, taint: bool) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if taint:
        spec["taints"] = [{"key": TAINT_KEY, "value": "true", "effect": "NoSchedule"}]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": {"x86_64": "amd64", "aarch64": "arm64"}.get(
                    platform.machine(), "amd64"
                ),
                LABEL: "true",
            },
        },
        "spec": spec,
    }


def node_status(ready: bool = True, message: str = "podrunner is running pods") -> dict[str, Any]:
    now = _now()

    def cond(kind: str, status: str, reason: str, text: str) -> dict[str, Any]:
        return {
            "type": kind,
            "status": status,
            "reason": reason,
            "message": text,
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }

    return {
        "capacity": capacity(),
        "allocatable": capacity(),
        "conditions": [
            cond(
                "Ready",
                "True" if ready else "False",
                "PodRunnerReady" if ready else "PodRunnerStopped",
                message,
            ),
            cond("MemoryPressure", "False", "PodRunnerHasSufficientMemory", "no memory pressure"),
            cond("DiskPressure", "False", "PodRunnerHasNoDiskPressure", "no disk pressure"),
            cond("PIDPressure", "False", "PodRunnerHasSufficientPID", "no pid pressure"),
        ],
        "addresses": [
            {"type": "InternalIP", "address": POD_IP},
            {"type": "Hostname", "address": "localhost"},
        ],
        "nodeInfo": {
            "machineID": "podrunner",
            "systemUUID": "podrunner",
            "bootID": "podrunner",
            "kernelVersion": platform.release(),
            "osImage": "baton dev podrunner (local processes)",
            "containerRuntimeVersion": "podrunner://0.1",
            "kubeletVersion": "v1.35.0-podrunner",
            "kubeProxyVersion": "",
            "operatingSystem": "linux",
            "architecture": "amd64",
        },
    }


class NodeAgent:
    """Registers the Node, keeps its Lease fresh on a thread, and removes both at the end."""

    def __init__(self, api: Api, name: str, *, taint: bool) -> None:
        self.api = api
        self.name = name
        self.taint = taint
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"node-{name}", daemon=True)

    def register(self) -> None:
        body = node_object(self.name, taint=self.taint)
        self.api.create("v1", "Node", body)
        self.api.patch("v1", "Node", self.name, {"status": node_status()}, status=True)
        # The API server adds node.kubernetes.io/not-ready on creation and the node lifecycle
        # controller, which would lift it once Ready, is off in the local stack: set the list.
        self.api.patch(
            "v1",
            "Node",
            self.name,
            {"metadata": body["metadata"], "spec": {"taints": body["spec"].get("taints")}},
        )
        self._renew()
        self._thread.start()

    def _renew(self) -> None:
        spec = {
            "holderIdentity": self.name,
            "leaseDurationSeconds": LEASE_SECONDS,
            "renewTime": _now(micro=True),
        }
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": LEASE_NAMESPACE},
            "spec": spec,
        }
        if not self.api.create("coordination.k8s.io/v1", "Lease", lease, namespace=LEASE_NAMESPACE):
            self.api.patch(
                "coordination.k8s.io/v1", "Lease", self.name, {"spec": spec}, namespace=LEASE_NAMESPACE
            )

    def _beat(self) -> None:
        beats = 0
        while not self._stop.wait(10.0):
            beats += 1
            try:
                self._renew()
                if beats % 6 == 0:
                    self.api.patch("v1", "Node", self.name, {"status": node_status()}, status=True)
            except Exception as exc:  # the API server restarting: try again next beat
                print(f"podrunner: heartbeat failed: {exc}", flush=True)

    def unregister(self) -> None:
        """Delete the Node and its Lease: Pods left bound to it are garbage-collected like a lost node's."""
        self._stop.set()
        self.api.delete("coordination.k8s.io/v1", "Lease", self.name, LEASE_NAMESPACE)
        self.api.delete("v1", "Node", self.name)
