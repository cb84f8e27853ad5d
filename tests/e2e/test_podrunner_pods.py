"""The pod runner with bare Pods: restart policies, a missing Secret, selection, the CLI.

Each test uses its own namespace and its own Node, so runners of parallel tests never
touch each other's Pods; the Node is tainted, so kube-scheduler never puts Pods there.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from batondev import paths
from batondev.paths import REPO
from batondev.podrunner import harness, process

from baton.testing import wait_for

pytestmark = pytest.mark.e2e

KubectlFn = Callable[..., "subprocess.CompletedProcess[str]"]


def bare_pod(
    name: str, script: str, *, policy: str, labels: dict[str, str] | None = None, env: list[Any] | None = None
) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {
                "restartPolicy": policy,
                "terminationGracePeriodSeconds": 2,
                "containers": [
                    {
                        "name": "main",
                        "image": "ignored",
                        "command": ["python", "-c", script],
                        "env": env or [],
                    }
                ],
            },
        }
    )


def pod(kubectl: KubectlFn, ns: str, name: str) -> dict[str, Any] | None:
    out = kubectl("get", "pod", name, "-n", ns, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def phase(kubectl: KubectlFn, ns: str, name: str) -> str | None:
    p = pod(kubectl, ns, name)
    return (p.get("status") or {}).get("phase") if p else None


def test_restart_policies_and_config_errors(kubectl: KubectlFn, namespace: str, tmp_path: Path) -> None:
    ns = namespace
    with harness.running(ns, log_dir=tmp_path) as runner:
        kubectl("apply", "-n", ns, "-f", "-", input=bare_pod("ok", "print('done')", policy="Never"))
        kubectl(
            "apply", "-n", ns, "-f", "-", input=bare_pod("bad", "import sys; sys.exit(3)", policy="Never")
        )
        kubectl(
            "apply",
            "-n",
            ns,
            "-f",
            "-",
            input=bare_pod(
                "flaky",
                "import os, sys; sys.exit(0 if os.path.exists(os.environ['MARK']) else 1)",
                policy="OnFailure",
                env=[
                    {"name": "MARK", "value": str(tmp_path / "mark")},
                    {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "later", "key": "token"}}},
                ],
            ),
        )
        wait_for(
            "ok Succeeded", lambda: phase(kubectl, ns, "ok") == "Succeeded", timeout=30, detail=runner.tail
        )
        wait_for("bad Failed", lambda: phase(kubectl, ns, "bad") == "Failed", timeout=30, detail=runner.tail)
        bad = pod(kubectl, ns, "bad")
        assert bad is not None
        assert bad["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
        assert bad["status"]["containerStatuses"][0]["restartCount"] == 0

        # A missing Secret: CreateContainerConfigError until it exists, then the process runs.
        def waiting_reason() -> str | None:
            p = pod(kubectl, ns, "flaky")
            statuses = (p or {}).get("status", {}).get("containerStatuses") or [{}]
            reason: str | None = statuses[0].get("state", {}).get("waiting", {}).get("reason")
            return reason

        wait_for(
            "CreateContainerConfigError",
            lambda: waiting_reason() == "CreateContainerConfigError",
            timeout=30,
            detail=runner.tail,
        )
        assert phase(kubectl, ns, "flaky") == "Pending"
        kubectl("create", "secret", "generic", "later", "--from-literal=token=t", "-n", ns)
        # OnFailure: it fails (no mark yet) and is restarted with back-off until the mark appears.
        wait_for(
            "flaky restarted",
            lambda: (
                ((pod(kubectl, ns, "flaky") or {}).get("status", {}).get("containerStatuses") or [{}])[0].get(
                    "restartCount", 0
                )
                >= 1
            ),
            timeout=30,
            detail=runner.tail,
        )
        (tmp_path / "mark").touch()
        wait_for(
            "flaky Succeeded",
            lambda: phase(kubectl, ns, "flaky") == "Succeeded",
            timeout=40,
            detail=runner.tail,
        )
        logs = (paths.RUN / "podrunner" / ns / "ok" / "main.log").read_text()
        assert "done" in logs


def test_selector_and_detached_cli(kubectl: KubectlFn, namespace: str) -> None:
    ns = namespace
    node = f"podrunner-cli-{uuid.uuid4().hex[:6]}"
    serve = "import time\nwhile True: time.sleep(1)"
    kubectl(
        "apply", "-n", ns, "-f", "-", input=bare_pod("picked", serve, policy="Always", labels={"run": "yes"})
    )
    kubectl("apply", "-n", ns, "-f", "-", input=bare_pod("ignored", serve, policy="Always"))
    cli = [str(REPO / "dev" / "podrunner")]
    subprocess.run([*cli, "start", "--node", node, "-n", ns, "-l", "run=yes"], check=True, timeout=60)
    log = paths.RUN / f"podrunner-{node}" / "log"

    def tail() -> str:
        return log.read_text(errors="replace")[-3000:] if log.exists() else "(no log)"

    try:
        running = wait_for(
            "picked Running",
            lambda: pod(kubectl, ns, "picked") if phase(kubectl, ns, "picked") == "Running" else None,
            timeout=30,
            detail=tail,
        )
        assert running["spec"]["nodeName"] == node
        node_obj = json.loads(kubectl("get", "node", node, "-o", "json").stdout)
        # only our taint: the API server's not-ready taint is lifted, as the node lifecycle controller would
        assert {t["key"] for t in node_obj["spec"]["taints"]} == {"podrunner.baton.dev/local"}
        assert {c["type"]: c["status"] for c in node_obj["status"]["conditions"]}["Ready"] == "True"
        kubectl("get", "lease", node, "-n", "kube-node-lease")
        ignored = pod(kubectl, ns, "ignored")
        assert ignored is not None and not ignored["spec"].get("nodeName")  # not selected: left alone
        assert subprocess.run([*cli, "status", "--node", node], timeout=60).returncode == 0
        pid = int(running["status"]["containerStatuses"][0]["containerID"].removeprefix("podrunner://"))
    finally:
        subprocess.run([*cli, "stop", "--node", node], check=True, timeout=90)
    # Stopping the runner ends its processes and removes its Node.
    assert not process.orphans(node)
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert kubectl("get", "node", node, check=False).returncode != 0


WHOAMI = """
from kubernetes import client, config
config.load_kube_config()
review = client.AuthenticationV1Api().create_self_subject_review({"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
print("user:", review.status.user_info.username, flush=True)
"""


def test_service_account_token_reaches_the_api(kubectl: KubectlFn, namespace: str, tmp_path: Path) -> None:
    """A process that talks to the API server does it as its Pod's ServiceAccount (as the operator will)."""
    ns = namespace
    wait_for(
        "default ServiceAccount",
        lambda: kubectl("get", "serviceaccount", "default", "-n", ns, check=False).returncode == 0,
        timeout=30,
        detail=lambda: "",
    )
    with harness.running(ns, log_dir=tmp_path) as runner:
        kubectl("apply", "-n", ns, "-f", "-", input=bare_pod("whoami", WHOAMI, policy="Never"))
        wait_for(
            "whoami Succeeded",
            lambda: phase(kubectl, ns, "whoami") == "Succeeded",
            timeout=30,
            detail=runner.tail,
        )
    log = (paths.RUN / "podrunner" / ns / "whoami" / "main.log").read_text()
    assert f"user: system:serviceaccount:{ns}:default" in log


def test_kube_scheduler_binds_tolerating_pods(kubectl: KubectlFn, namespace: str, tmp_path: Path) -> None:
    """--scheduler: kube-scheduler places the Pod once the runner has bound its claim."""
    ns = namespace
    node = f"podrunner-sched-{uuid.uuid4().hex[:6]}"
    claim = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "box"},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}},
    }
    pod_obj = json.loads(
        bare_pod(
            "writer",
            "import os; open(os.environ['OUT'], 'w').write('written')",
            policy="Never",
            env=[{"name": "OUT", "value": "/box/out.txt"}],
        )
    )
    spec = pod_obj["spec"]
    spec["containers"][0]["volumeMounts"] = [{"name": "box", "mountPath": "/box"}]
    spec["volumes"] = [{"name": "box", "persistentVolumeClaim": {"claimName": "box"}}]
    # the toleration lets kube-scheduler use a runner's Node; the nodeSelector picks this test's one
    spec["tolerations"] = [{"key": "podrunner.baton.dev/local", "operator": "Exists", "effect": "NoSchedule"}]
    spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(claim))
    kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(pod_obj))
    with harness.running(ns, node=node, extra=["--scheduler"], log_dir=tmp_path) as runner:
        wait_for(
            "writer Succeeded",
            lambda: phase(kubectl, ns, "writer") == "Succeeded",
            timeout=60,
            detail=runner.tail,
        )
    writer = pod(kubectl, ns, "writer")
    assert writer is not None and writer["spec"]["nodeName"] == node
    bound = json.loads(kubectl("get", "pvc", "box", "-n", ns, "-o", "json").stdout)
    assert bound["status"]["phase"] == "Bound"
    assert (paths.RUN / "podrunner" / ns / "pvc" / "box" / "out.txt").read_text() == "written"
