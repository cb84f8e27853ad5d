"""Helpers for the operator's integration tests: CRDs, a real operator subprocess, Pod readiness.

The operator runs as `baton operator` in its own process, exactly as in production, watching
only the test's namespace so tests can run side by side. There is no kubelet, so tests mark
the Pods that kube-controller-manager creates Ready themselves (status subresource).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import yaml
from batondev.e2e import lease_args, wait_established
from batondev.paths import CRD, EXAMPLE

from baton.testing import wait_for
from tests.conftest import Kube
from tests.support import kube_api

BATON = Path(sys.executable).parent / "baton"

T = TypeVar("T")
KubectlFn = kube_api.KubectlFn  # the tests import it from here


def install_crds(kubectl: KubectlFn) -> None:
    """Apply the StreamApp CRD (idempotent) and wait until it is served; and the two ClusterRoles
    the operator binds by default name (compaction Jobs, zone-aware workers), as the chart does."""
    from baton.operator.core.rbac import (
        DEFAULT_OPERATOR_NAME,
        compactor_role_name,
        node_reader_role_name,
        rbac_objects,
    )

    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    bound = {compactor_role_name(), node_reader_role_name()}
    for obj in rbac_objects(DEFAULT_OPERATOR_NAME, "default"):
        if obj["kind"] == "ClusterRole" and obj["metadata"]["name"] in bound:
            kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", input=json.dumps(obj))
    wait_established(kubectl, "streamapps.baton.dev")


def service_account_kubeconfig(kubectl: KubectlFn, kube: Kube, namespace: str, sa: str, dest: Path) -> Path:
    """A kubeconfig that authenticates as the ServiceAccount with a real bound token."""
    token = kubectl("create", "token", sa, "-n", namespace, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(kube.kubeconfig.read_text())
    cluster = dict(admin["clusters"][0]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "local", "cluster": cluster}],
        "users": [{"name": sa, "user": {"token": token}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": sa, "namespace": namespace}}],
        "current-context": "sa",
    }
    dest.write_text(yaml.safe_dump(config))
    return dest


# An HTTP 403 on its own: not part of a longer number (a resourceVersion, a Lease identity) nor a
# log line's time (",403" milliseconds: test_chart_install failed on "14:18:45,403" once).
_STATUS_403 = re.compile(r"(?<![\w.,:])403(?![\w.])")


def refused_calls(log: str) -> list[str]:
    """The operator's log lines that report a call the API server refused (Forbidden, 403)."""
    return [line for line in log.splitlines() if "Forbidden" in line or _STATUS_403.search(line)]


def get_json(kubectl: KubectlFn, *args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json").stdout)


def try_get_json(kubectl: KubectlFn, *args: str) -> Any:
    out = kubectl("get", *args, "-o", "json", check=False)
    return json.loads(out.stdout) if out.returncode == 0 else None


def example_manifest(namespace: str, **spec: Any) -> dict[str, Any]:
    import yaml

    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"]["namespace"] = namespace
    body["spec"].update(spec)
    return body


def apply(kubectl: KubectlFn, body: dict[str, Any]) -> None:
    kubectl("apply", "-f", "-", input=json.dumps(body))


def patch_pod_status(kubectl: KubectlFn, namespace: str, name: str, status: dict[str, Any]) -> None:
    """Merge ``status`` into a Pod's status, as the kubelet would report it."""
    kubectl(
        "patch",
        "pod",
        name,
        "-n",
        namespace,
        "--subresource=status",
        "--type=merge",
        "-p",
        json.dumps({"status": status}),
    )


def mark_pods_ready(kubectl: KubectlFn, namespace: str, selector: str, expect: int) -> list[str]:
    """Play kubelet: once ``expect`` Pods match, report each Running and Ready."""
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    status = {
        "phase": "Running",
        "conditions": [
            {"type": t, "status": "True", "lastTransitionTime": now}
            for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ],
    }
    return report_pod_status(kubectl, namespace, selector, expect, status)


def report_pod_status(
    kubectl: KubectlFn, namespace: str, selector: str, expect: int, status: dict[str, Any]
) -> list[str]:
    """Play kubelet: once ``expect`` Pods match, merge ``status`` into each one's status."""

    def pods() -> list[str] | None:
        items = get_json(kubectl, "pods", "-n", namespace, "-l", selector)["items"]
        return [p["metadata"]["name"] for p in items] if len(items) >= expect else None

    names = wait_for(f"{expect} pods {selector}", pods)
    for name in names:
        patch_pod_status(kubectl, namespace, name, status)
    return names


def contains(live: Any, desired: Any, path: str = "") -> list[str]:
    """Where ``live`` differs from ``desired`` (ignoring fields the API server added)."""
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return [f"{path}: {live!r} is not an object"]
        return [d for k, v in desired.items() for d in contains(live.get(k), v, f"{path}.{k}")]
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return [f"{path}: {live!r} != {desired!r}"]
        return [
            d
            for i, (a, b) in enumerate(zip(live, desired, strict=True))
            for d in contains(a, b, f"{path}[{i}]")
        ]
    return [] if live == desired else [f"{path}: {live!r} != {desired!r}"]


class OperatorProcess:
    """`baton operator` as a subprocess, with its log in a file the test can read."""

    def __init__(
        self, log: Path, namespace: str, kubeconfig: Path, *args: str, env: dict[str, str] | None = None
    ) -> None:
        self.log = log
        env = {**os.environ, "KUBECONFIG": str(kubeconfig), "PYTHONUNBUFFERED": "1", **(env or {})}
        self._out = log.open("ab")
        self.proc = subprocess.Popen(
            [str(BATON), "operator", "-n", namespace, *lease_args(6), *args],
            stdout=self._out,
            stderr=subprocess.STDOUT,
            env=env,
        )

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def count(self, pattern: str) -> int:
        return len(re.findall(pattern, self.text()))

    def wait_log(self, pattern: str, timeout: float = 60, after: int = 0) -> None:
        wait_for(
            f"operator log /{pattern}/ (> {after} times) in {self.log}",
            lambda: self.count(pattern) > after or self.proc.poll() is not None,
            timeout,
        )
        assert self.proc.poll() is None, f"operator exited {self.proc.returncode}:\n{self.text()[-3000:]}"

    def kill(self, sig: int = signal.SIGKILL) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self._out.close()


# kopf has talked to the API server (a leader, or --standalone), or a follower waits for the Lease
STARTED = r"Initial authentication has finished|leader election: waiting for lease"


def start_operator(
    tmp_path: Path, namespace: str, kubeconfig: Path, name: str, *args: str, env: dict[str, str] | None = None
) -> OperatorProcess:
    op = OperatorProcess(tmp_path / f"{name}.log", namespace, kubeconfig, *args, env=env)
    op.wait_log(STARTED, timeout=60)
    return op


def operators(
    tmp_path: Path, namespace: str, kubeconfig: Path, before_stop: Callable[[], object] = lambda: None
) -> Iterator[Callable[..., OperatorProcess]]:
    """Generator behind the tests' ``operator`` fixtures: start operators, stop them all at the end.

    ``before_stop`` runs while they still run (deleting the apps, so no finalizer is left behind).
    """
    started: list[OperatorProcess] = []

    def start(*args: str, name: str | None = None, env: dict[str, str] | None = None) -> OperatorProcess:
        op = start_operator(
            tmp_path, namespace, kubeconfig, name or f"operator-{len(started)}", *args, env=env
        )
        started.append(op)
        return op

    yield start
    if any(op.proc.poll() is None for op in started):
        before_stop()
    for op in started:
        op.kill(signal.SIGTERM)


def least_privilege_operators(
    kube: Kube, kubectl: KubectlFn, namespace: str, tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    """Operators running as the ServiceAccount with exactly baton/operator/core/rbac.py's namespaced
    RBAC (CRDs installed, a real bound token); the apps are deleted before they stop."""
    from baton.operator.core.rbac import rbac_objects

    install_crds(kubectl)
    for obj in rbac_objects("baton-operator", namespace, clusterwide=False):
        apply(kubectl, obj)
    kubeconfig = service_account_kubeconfig(
        kubectl, kube, namespace, "baton-operator", tmp_path / "sa.kubeconfig"
    )
    yield from operators(
        tmp_path,
        namespace,
        kubeconfig,
        lambda: kubectl("delete", "sapp", "--all", "-n", namespace, "--timeout=30s", check=False),
    )
