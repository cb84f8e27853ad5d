"""The real kube-apiserver, kube-controller-manager and helm do their jobs."""

from __future__ import annotations

import json
import subprocess
import textwrap
import threading
import time

import pytest
from batondev.e2e import wait_established
from batondev.paths import FIXTURES

from baton.testing import wait_for
from tests.conftest import Kube
from tests.support.durations import cli_deadline
from tests.support.kube_api import KubectlFn

pytestmark = pytest.mark.integration


CRD = textwrap.dedent("""
    apiVersion: apiextensions.k8s.io/v1
    kind: CustomResourceDefinition
    metadata:
      name: widgets.smoke.baton.dev
    spec:
      group: smoke.baton.dev
      scope: Namespaced
      names: {plural: widgets, singular: widget, kind: Widget}
      versions:
      - name: v1
        served: true
        storage: true
        schema:
          openAPIV3Schema:
            type: object
            properties:
              spec:
                type: object
                properties:
                  size: {type: integer, minimum: 1}
""")


def test_version_is_the_pinned_release(kubectl: KubectlFn) -> None:
    from batondev import versions

    out = json.loads(kubectl("version", "-o", "json").stdout)
    assert out["serverVersion"]["gitVersion"] == versions.KUBERNETES
    assert out["clientVersion"]["gitVersion"] == versions.KUBERNETES


def test_crd_and_custom_object_are_created_and_watched(
    kube: Kube, kubectl: KubectlFn, namespace: str
) -> None:
    kubectl("apply", "-f", "-", input=CRD)
    wait_established(kubectl, "widgets.smoke.baton.dev")

    watch = subprocess.Popen(
        [
            str(kube.kubectl),
            f"--kubeconfig={kube.kubeconfig}",
            "get",
            "widgets",
            "-n",
            namespace,
            "--watch",
            "-o",
            'jsonpath={.metadata.name}{"\\n"}',
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    seen: list[str] = []
    reader = threading.Thread(
        target=lambda: seen.extend(line.strip() for line in watch.stdout or []), daemon=True
    )
    reader.start()
    try:
        time.sleep(1)  # the watch is established before the object exists
        kubectl(
            "apply",
            "-n",
            namespace,
            "-f",
            "-",
            input="apiVersion: smoke.baton.dev/v1\nkind: Widget\nmetadata: {name: w1}\nspec: {size: 3}\n",
        )
        wait_for("the watch to deliver w1", lambda: "w1" in seen, 30)
    finally:
        watch.terminate()
    # the schema is enforced by the API server itself
    bad = kubectl(
        "apply",
        "-n",
        namespace,
        "-f",
        "-",
        check=False,
        input="apiVersion: smoke.baton.dev/v1\nkind: Widget\nmetadata: {name: w2}\nspec: {size: 0}\n",
    )
    assert bad.returncode != 0
    assert "spec.size" in bad.stderr and "should be greater than or equal to 1" in bad.stderr


def test_statefulset_parallel_pods_are_created_by_controller_manager(
    kubectl: KubectlFn, namespace: str
) -> None:
    sts = textwrap.dedent("""
        apiVersion: apps/v1
        kind: StatefulSet
        metadata: {name: smoke}
        spec:
          serviceName: smoke
          replicas: 3
          podManagementPolicy: Parallel
          selector: {matchLabels: {app: smoke}}
          template:
            metadata: {labels: {app: smoke}}
            spec:
              containers:
              - {name: c, image: example.invalid/none:1, command: ["true"]}
    """)
    kubectl("apply", "-n", namespace, "-f", "-", input=sts)

    def pods() -> list[str]:
        out = kubectl("get", "pods", "-n", namespace, "-l", "app=smoke", "-o", "json").stdout
        return sorted(p["metadata"]["name"] for p in json.loads(out)["items"])

    # Parallel: all three exist at once although none ever becomes Ready (no kubelet here)
    wait_for("three pods from the StatefulSet", lambda: pods() == ["smoke-0", "smoke-1", "smoke-2"], 60)
    owner = json.loads(kubectl("get", "pod", "smoke-1", "-n", namespace, "-o", "json").stdout)
    assert owner["metadata"]["ownerReferences"][0]["kind"] == "StatefulSet"


def test_helm_install_of_a_tiny_chart(kube: Kube, kubectl: KubectlFn, namespace: str) -> None:
    def helm(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(kube.helm), f"--kubeconfig={kube.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=cli_deadline(args),
            check=True,
        )

    # helm's own --timeout (its default is 5 min) stays inside the subprocess deadline
    helm(
        "install",
        "smoke",
        str(FIXTURES / "tiny-chart"),
        "-n",
        namespace,
        "--set",
        "greeting=hi",
        "--wait",
        "--timeout=90s",
    )
    cm = json.loads(kubectl("get", "configmap", "smoke-greeting", "-n", namespace, "-o", "json").stdout)
    assert cm["data"]["greeting"] == "hi"
    status = json.loads(helm("status", "smoke", "-n", namespace, "-o", "json").stdout)
    assert status["info"]["status"] == "deployed"
    helm("uninstall", "smoke", "-n", namespace, "--wait", "--timeout=90s")
    gone = kubectl("get", "configmap", "smoke-greeting", "-n", namespace, check=False)
    assert gone.returncode != 0 and "NotFound" in gone.stderr
