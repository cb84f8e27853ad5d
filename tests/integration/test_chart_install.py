"""charts/baton on the real API server: install, run the operator it describes, upgrade, uninstall.

There is no kubelet, so the chart's Deployment Pods are created but never run. Instead the
test runs the operator as a local process with exactly the container args of the installed
Deployment and with the chart's ServiceAccount's own token (TokenRequest), so it has the
chart's RBAC and nothing more. A StreamApp applied afterwards must reconcile to Ready.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from batondev.paths import REPO

from baton.testing import wait_for
from tests.support import helm as chart
from tests.support.helm import Helm, failed_create_events, pods_of
from tests.support.operator import (
    BATON,
    KubectlFn,
    apply,
    example_manifest,
    get_json,
    mark_pods_ready,
    refused_calls,
    service_account_kubeconfig,
    try_get_json,
)

CHART = REPO / "charts" / "baton"

pytestmark = pytest.mark.integration


# The chart tests' fixtures, shared with the security tests that install the chart.
helm = chart.stack_helm
release = chart.release


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, as the kubelet would; killed if it does not end in 30 s."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def operator_args_from_deployment(deployment: dict[str, Any], health_port: int) -> list[str]:
    """The installed container's args, with the liveness endpoint moved to a free local port."""
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = [str(a) for a in container["args"]]
    return [
        f"--liveness=http://127.0.0.1:{health_port}/healthz" if a.startswith("--liveness=") else a
        for a in args
    ]


def test_install_run_reconcile_upgrade_uninstall(
    helm: Helm, release: str, kubectl: KubectlFn, namespace: str, tmp_path: Path
) -> None:
    notes = helm.install(
        release, namespace, f"operator.watchNamespaces={{{namespace}}}", "operator.kafka=false"
    )
    assert "helm upgrade` never changes the CRDs" in notes and "its leader applies" in notes
    full = f"{release}-baton"

    # The objects the chart promises, as the API server stores them.
    dep = get_json(kubectl, "deployment", full, "-n", namespace)
    assert dep["spec"]["replicas"] == 2
    for kind in ("serviceaccount", "service", "pdb", "role", "rolebinding"):
        name = f"{full}-metrics" if kind == "service" else full
        assert try_get_json(kubectl, kind, name, "-n", namespace), f"{kind}/{name} missing"
    assert try_get_json(kubectl, "role", f"{full}-leader-election", "-n", namespace)
    assert try_get_json(kubectl, "clusterrole", f"{full}-{namespace}-discovery")
    selector = ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())
    wait_for("the Deployment's 2 Pods", lambda: len(pods_of(kubectl, namespace, selector)) == 2)

    # Run the operator the chart describes, as the chart's ServiceAccount.
    sa_config = service_account_kubeconfig(kubectl, helm.kube, namespace, full, tmp_path / "sa.kubeconfig")
    health = free_port()
    log = tmp_path / "operator.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(BATON), *operator_args_from_deployment(dep, health)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env={**os.environ, "KUBECONFIG": str(sa_config), "PYTHONUNBUFFERED": "1"},
        )
    try:
        wait_for(
            "operator start",
            lambda: "Initial authentication has finished" in log.read_text() or proc.poll() is not None,
            timeout=60,
        )
        assert proc.poll() is None, log.read_text()[-3000:]
        app = example_manifest(namespace, replicas=1, standbyReplicas=0)
        apply(kubectl, app)
        for color in ("blue", "green"):
            wait_for(
                f"StatefulSet {color}",
                lambda c=color: try_get_json(  # type: ignore[misc]
                    kubectl, "statefulset", f"click-counter-{c}", "-n", namespace
                ),
                timeout=60,
            )
            mark_pods_ready(kubectl, namespace, f"baton.dev/app=click-counter,baton.dev/color={color}", 1)
        kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=90s")
        # it acted as the holder of the chart's Lease, which its own Role lets it renew
        lease = get_json(kubectl, "lease", full, "-n", namespace)["spec"]
        assert lease["holderIdentity"] and lease["leaseDurationSeconds"] == 15
        text = log.read_text()
        assert not refused_calls(text), text[-3000:]
        kubectl("delete", "sapp", "click-counter", "-n", namespace, "--timeout=60s")
    finally:
        _stop(proc)

    # Upgrade: new values reach the Deployment, the CRD is left alone.
    crd_rv = get_json(kubectl, "crd", "streamapps.baton.dev")["metadata"]["resourceVersion"]
    helm(
        "upgrade",
        release,
        str(CHART),
        "-n",
        namespace,
        "--reuse-values",
        "--set=operator.replicas=3",
        "--set=image.tag=0.1.1",
    )
    dep = get_json(kubectl, "deployment", full, "-n", namespace)
    assert dep["spec"]["replicas"] == 3
    assert dep["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":0.1.1")
    assert json.loads(helm("status", release, "-n", namespace, "-o", "json").stdout)["version"] == 2
    assert get_json(kubectl, "crd", "streamapps.baton.dev")["metadata"]["resourceVersion"] == crd_rv

    # Uninstall removes what the chart made, cluster-scoped objects included, and keeps the CRD.
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=60s")
    for kind, name in (
        ("deployment", full),
        ("role", full),
        ("role", f"{full}-leader-election"),
        ("pdb", full),
    ):
        assert try_get_json(kubectl, kind, name, "-n", namespace) is None, f"{kind}/{name} left behind"
    assert try_get_json(kubectl, "clusterrole", f"{full}-{namespace}-discovery") is None
    assert try_get_json(kubectl, "crd", "streamapps.baton.dev") is not None
    assert failed_create_events(kubectl, namespace) == []


def test_cluster_wide_install_and_uninstall(
    crd_lock: None, helm: Helm, release: str, kubectl: KubectlFn, namespace: str
) -> None:
    """The default values: ClusterRole and ClusterRoleBinding, removed again; the Lease Role in its namespace."""
    helm.install(release, namespace)
    full = f"{release}-baton"
    role = get_json(kubectl, "clusterrole", full)
    assert any("statefulsets" in r["resources"] for r in role["rules"])
    assert not any("leases" in r["resources"] for r in role["rules"]), "Leases only in its own namespace"
    binding = get_json(kubectl, "clusterrolebinding", full)
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": full, "namespace": namespace}]
    assert try_get_json(kubectl, "rolebinding", f"{full}-leader-election", "-n", namespace)
    # a namespace's developers with the default roles: view reads StreamApps, edit writes them
    for who, role in (("viewer", "view"), ("developer", "edit")):
        kubectl("create", "serviceaccount", who, "-n", namespace)
        kubectl(
            "create",
            "rolebinding",
            who,
            f"--clusterrole={role}",
            f"--serviceaccount={namespace}:{who}",
            "-n",
            namespace,
        )

    def can(who: str, verb: str) -> bool:
        out = kubectl(
            "auth",
            "can-i",
            verb,
            "streamapps.baton.dev",
            "-n",
            namespace,
            f"--as=system:serviceaccount:{namespace}:{who}",
            check=False,
        )
        return out.stdout.strip() == "yes"

    # the clusterrole-aggregation controller folds the chart's rules into view and edit
    wait_for("view to read StreamApps", lambda: can("viewer", "list") and can("developer", "create"), 30)
    assert not can("viewer", "create") and not can("viewer", "delete")
    assert can("developer", "delete") and can("developer", "get")

    # the operator, cluster-wide, cannot bind arbitrary roles: the API server refuses a
    # RoleBinding to admin or a ClusterRoleBinding to cluster-admin written as its account,
    # takes one to the compactor role, and the account may write no Role at all
    operator = f"--as=system:serviceaccount:{namespace}:{full}"

    def bind_as_operator(kind: str, role: str) -> subprocess.CompletedProcess[str]:
        where = ["-n", namespace] if kind == "rolebinding" else []
        name = f"probe-{role}"
        return kubectl(
            "create", kind, name, f"--clusterrole={role}", f"--serviceaccount={namespace}:viewer",
            *where, operator, check=False,
        )  # fmt: skip

    for kind, role in (
        ("rolebinding", "admin"),
        ("rolebinding", "edit"),
        ("clusterrolebinding", "cluster-admin"),
    ):
        refused = bind_as_operator(kind, role)
        assert refused.returncode != 0 and "forbidden" in refused.stderr, (kind, role, refused.stderr)
    allowed = bind_as_operator("rolebinding", f"{full}-compactor")
    assert allowed.returncode == 0, allowed.stderr
    allowed = bind_as_operator("clusterrolebinding", f"{full}-node-reader")
    assert allowed.returncode == 0, allowed.stderr
    kubectl("delete", "clusterrolebinding", f"probe-{full}-node-reader")
    for verb in ("create", "patch"):
        for kind in ("roles", "clusterroles"):
            out = kubectl("auth", "can-i", verb, kind, "-A", operator, check=False)
            assert out.stdout.strip() == "no", (verb, kind)
    helm("uninstall", release, "-n", namespace, "--wait", "--timeout=60s")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and try_get_json(kubectl, "clusterrole", full) is not None:
        time.sleep(0.5)
    for kind in ("clusterrole", "clusterrolebinding"):
        assert try_get_json(kubectl, kind, full) is None, f"{kind}/{full} left behind"
    assert try_get_json(kubectl, "clusterrole", f"{full}-streamapps-view") is None
    wait_for("view without StreamApps again", lambda: not can("viewer", "list"), 30)


def test_a_namespaced_operator_manages_its_namespaces_and_refuses_another(
    helm: Helm, release: str, kubectl: KubectlFn, namespace: str, tmp_path: Path
) -> None:
    """The chart with watchNamespaces [this, second]: the operator, as the chart's account, runs
    apps in both; told to watch a third as well, it stops at once and says what is missing."""
    second, third = f"{namespace}-2"[:63], f"{namespace}-3"[:63]
    for ns in (second, third):
        kubectl("create", "namespace", ns)
    try:
        helm.install(
            release,
            namespace,
            f"operator.watchNamespaces={{{namespace},{second}}}",
            "operator.kafka=false",
            "operator.replicas=1",
        )
        full = f"{release}-baton"
        dep = get_json(kubectl, "deployment", full, "-n", namespace)
        sa_config = service_account_kubeconfig(
            kubectl, helm.kube, namespace, full, tmp_path / "sa.kubeconfig"
        )
        env = {**os.environ, "KUBECONFIG": str(sa_config), "PYTHONUNBUFFERED": "1"}
        args = operator_args_from_deployment(dep, free_port())

        refused = subprocess.run(
            [str(BATON), *args, f"--namespace={third}"], env=env, capture_output=True, text=True, timeout=60
        )
        assert refused.returncode != 0, refused.stderr
        assert f"does not cover namespace(s) {third}" in refused.stderr, refused.stderr
        assert "list streamapps.baton.dev" in refused.stderr and "operator.watchNamespaces" in refused.stderr
        assert f"namespace(s) {third} (" in refused.stderr and f"{namespace} (" not in refused.stderr

        log = tmp_path / "operator.log"
        with log.open("wb") as out:
            proc = subprocess.Popen([str(BATON), *args], stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            for ns in (namespace, second):
                apply(kubectl, example_manifest(ns, replicas=1, standbyReplicas=0))
            for ns in (namespace, second):
                wait_for(
                    f"the blue StatefulSet in {ns}",
                    lambda n=ns: try_get_json(kubectl, "statefulset", "click-counter-blue", "-n", n),  # type: ignore[misc]
                    timeout=60,
                )
            assert proc.poll() is None and not refused_calls(log.read_text()), log.read_text()[-3000:]
            for ns in (namespace, second):
                kubectl("delete", "sapp", "click-counter", "-n", ns, "--timeout=60s")
        finally:
            _stop(proc)
    finally:
        for ns in (second, third):
            kubectl("delete", "namespace", ns, "--wait=false", check=False)
