"""The local pod runner against the real API server, kube-controller-manager and processes.

A StatefulSet (Parallel, 2 replicas, a claim template) whose container is a tiny Python
HTTP server: the StatefulSet controller creates the Pods and claims, the runner binds and
runs them, and the tests check what a kubelet would guarantee: Ready Pods, resolved env,
a volume that outlives its Pod, restarts that count, and processes that end with the Pod.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from batondev import paths
from batondev.podrunner import harness
from batondev.podrunner.volumes import Layout

from baton.testing import wait_for

pytestmark = pytest.mark.e2e

KubectlFn = Callable[..., "subprocess.CompletedProcess[str]"]

# Serves the lines its Pods appended to the shared volume, and its env, on $PORT.
SERVER = """
import json, os, http.server, pathlib, signal, sys
d = pathlib.Path(os.environ["DATA_DIR"])
with open(d / "history", "a") as h:
    h.write(f"{os.environ['POD_NAME']} {os.environ['TIER']}\\n")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = {"/history": (d / "history").read_bytes(), "/env": json.dumps(dict(os.environ)).encode()}.get(
            self.path, b"ok")
        self.send_response(200); self.end_headers(); self.wfile.write(body)
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H).serve_forever()
"""


def statefulset(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "serviceName": name,
            "replicas": 2,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name, "tier": "demo"}},
                "spec": {
                    "terminationGracePeriodSeconds": 5,
                    "containers": [
                        {
                            "name": "server",
                            "image": "registry.invalid/ignored:1",
                            "command": ["python", "-c", SERVER],
                            "env": [
                                {
                                    "name": "POD_NAME",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                                },
                                {
                                    "name": "TIER",
                                    "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['tier']"}},
                                },
                                {"name": "PORT", "value": "8080"},
                                {"name": "DATA_DIR", "value": "/data"},
                                {
                                    "name": "GREETING",
                                    "valueFrom": {"secretKeyRef": {"name": "greet", "key": "word"}},
                                },
                                {"name": "MESSAGE", "value": "$(GREETING) from $(POD_NAME)"},
                            ],
                            "ports": [{"name": "http", "containerPort": 8080}],
                            "readinessProbe": {
                                "httpGet": {"path": "/readyz", "port": "http"},
                                "periodSeconds": 1,
                            },
                            "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                        }
                    ],
                },
            },
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "data"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
                }
            ],
        },
    }


def get(kubectl: KubectlFn, ns: str, *what: str) -> Any:
    out = kubectl("get", *what, "-n", ns, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def is_ready(pod: dict[str, Any] | None) -> bool:
    if not pod or pod["metadata"].get("deletionTimestamp"):
        return False
    conditions = {c["type"]: c["status"] for c in (pod.get("status") or {}).get("conditions") or []}
    return pod["status"].get("phase") == "Running" and conditions.get("Ready") == "True"


def http(pod: dict[str, Any], path: str) -> str:
    port = harness.local_ports(pod)[8080]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
        return str(resp.read().decode())


def pid_of(pod: dict[str, Any]) -> int:
    return int(pod["status"]["containerStatuses"][0]["containerID"].removeprefix("podrunner://"))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def ready_pod(kubectl: KubectlFn, ns: str, name: str) -> Callable[[], dict[str, Any] | None]:
    """A check for ``wait_for``: the Pod when it is Running and Ready, else None."""

    def check() -> dict[str, Any] | None:
        pod: dict[str, Any] | None = get(kubectl, ns, "pod", name)
        return pod if is_ready(pod) else None

    return check


@pytest.fixture
def runner(namespace: str, tmp_path: Path) -> Iterator[harness.RunnerHandle]:
    with harness.running(namespace, log_dir=tmp_path) as handle:
        yield handle


def test_statefulset_lifecycle(kubectl: KubectlFn, namespace: str, runner: harness.RunnerHandle) -> None:
    ns = namespace
    kubectl("create", "secret", "generic", "greet", "--from-literal=word=hello", "-n", ns)
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(statefulset("web")))

    # Both Pods run and become Ready; the StatefulSet controller sees it, the claims are Bound.
    pods = {
        n: wait_for(f"{n} Ready", ready_pod(kubectl, ns, n), detail=runner.tail) for n in ("web-0", "web-1")
    }
    wait_for(
        "readyReplicas 2", lambda: get(kubectl, ns, "statefulset", "web")["status"].get("readyReplicas") == 2
    )
    claims = get(kubectl, ns, "pvc")["items"]
    assert sorted((c["metadata"]["name"], c["status"]["phase"]) for c in claims) == [
        ("data-web-0", "Bound"),
        ("data-web-1", "Bound"),
    ]
    assert pods["web-0"]["spec"]["nodeName"] == runner.node

    # Env: downward API, Secret, $(VAR) expansion, the remapped port and the rewritten mount path.
    env = json.loads(http(pods["web-0"], "/env"))
    volumes = json.loads(pods["web-0"]["metadata"]["annotations"]["podrunner.baton.dev/volumes"])
    assert env["POD_NAME"] == "web-0" and env["TIER"] == "demo"
    assert env["MESSAGE"] == "hello from web-0"
    assert env["PORT"] == str(harness.local_ports(pods["web-0"])[8080]) != "8080"
    assert (
        env["DATA_DIR"] == volumes["data"] == str(Layout(paths.RUN / "podrunner").claim_dir(ns, "data-web-0"))
    )
    assert (Path(volumes["data"]) / "history").read_text() == "web-0 demo\n"
    assert Path(sys.executable).parent.as_posix() == env["PATH"].split(os.pathsep)[0]
    assert http(pods["web-1"], "/history") == "web-1 demo\n"

    # A killed process is restarted in place: restartCount 1, last exit 137, Ready again.
    killed = pid_of(pods["web-1"])
    os.kill(killed, 9)
    restarted = wait_for(
        "web-1 restarted",
        lambda: (
            (p := get(kubectl, ns, "pod", "web-1"))
            and p["status"]["containerStatuses"][0]["restartCount"] == 1
            and is_ready(p)
            and p
        ),
        detail=runner.tail,
    )
    status = restarted["status"]["containerStatuses"][0]
    assert status["lastState"]["terminated"]["exitCode"] == 137
    assert pid_of(restarted) != killed
    assert http(restarted, "/history") == "web-1 demo\nweb-1 demo\n"

    # A deleted Pod is stopped, recreated by the StatefulSet controller, and finds its volume.
    old_uid, old_pid = pods["web-0"]["metadata"]["uid"], pid_of(pods["web-0"])
    kubectl("delete", "pod", "web-0", "-n", ns, "--wait=false")
    new = wait_for(
        "web-0 recreated",
        lambda: (
            (p := get(kubectl, ns, "pod", "web-0")) and p["metadata"]["uid"] != old_uid and is_ready(p) and p
        ),
        detail=runner.tail,
    )
    assert not alive(old_pid)
    assert http(new, "/history") == "web-0 demo\nweb-0 demo\n"

    # Deleting the StatefulSet ends every process and every Pod.
    pids = [pid_of(new), pid_of(restarted)]
    kubectl("delete", "statefulset", "web", "-n", ns, "--wait=false")
    wait_for("pods gone", lambda: not get(kubectl, ns, "pod")["items"], detail=runner.tail)
    assert not any(alive(p) for p in pids)
