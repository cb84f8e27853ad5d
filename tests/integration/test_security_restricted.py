"""Pod Security "restricted" on the real API server: the Pods Baton makes are admitted.

The namespace enforces the restricted profile (label pod-security.kubernetes.io/enforce).
kube-controller-manager creates the Pods of the chart's operator Deployment and of the
StatefulSets that `baton render examples/click-counter.yaml` prints; the PodSecurity
admission plugin refuses a non-compliant Pod, which the controllers report as a
FailedCreate event. A non-compliant Pod is refused first, to show enforcement is on.
"""

from __future__ import annotations

import json
import subprocess

import pytest
from batondev.paths import EXAMPLE

from baton.testing import wait_for
from tests.support import helm as chart
from tests.support.helm import Helm, failed_create_events, pods_of
from tests.support.operator import BATON, KubectlFn, get_json

pytestmark = pytest.mark.integration

# The chart tests' fixtures, shared.
helm = chart.stack_helm
release = chart.release

PSA = "pod-security.kubernetes.io"


def test_restricted_namespace_admits_operator_and_worker_pods(
    helm: Helm, release: str, kubectl: KubectlFn, namespace: str
) -> None:
    kubectl(
        "label",
        "namespace",
        namespace,
        f"{PSA}/enforce=restricted",
        f"{PSA}/enforce-version=latest",
        f"{PSA}/warn=restricted",
    )

    # Enforcement is on: a Pod without the restricted settings is refused.
    bare = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "bare", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }
    refused = kubectl("create", "-f", "-", input=json.dumps(bare), check=False)
    assert refused.returncode != 0 and "violates PodSecurity" in refused.stderr, refused.stderr

    # The operator's Pods, created by the Deployment's ReplicaSet.
    helm.install(release, namespace, f"operator.watchNamespaces={{{namespace}}}")
    selector = f"app.kubernetes.io/instance={release},app.kubernetes.io/component=operator"
    wait_for(
        "2 operator Pods admitted",
        lambda: len(pods_of(kubectl, namespace, selector)) == 2 or failed_create_events(kubectl, namespace),
    )
    assert failed_create_events(kubectl, namespace) == []

    # The workers' Pods, from the StatefulSets the operator would create for the example.
    rendered = subprocess.run(
        [str(BATON), "render", str(EXAMPLE), "-n", namespace],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    applied = kubectl("apply", "-f", "-", input=rendered)
    assert "statefulset.apps/click-counter-blue" in applied.stdout, applied.stdout
    assert "Warning" not in applied.stderr, applied.stderr  # PSA warns on the template too
    for color in ("blue", "green"):
        sts = get_json(kubectl, "statefulset", f"click-counter-{color}", "-n", namespace)
        want = sts["spec"]["replicas"]
        sel = f"baton.dev/app=click-counter,baton.dev/color={color}"
        wait_for(
            f"{want} {color} worker Pods admitted",
            lambda s=sel, w=want: (
                len(  # type: ignore[misc]
                    pods_of(kubectl, namespace, s)
                )
                == w
                or failed_create_events(kubectl, namespace)
            ),
        )
    assert failed_create_events(kubectl, namespace) == []
    for pod in pods_of(kubectl, namespace, "baton.dev/app=click-counter"):
        (container,) = pod["spec"]["containers"]
        assert container["securityContext"]["readOnlyRootFilesystem"] is True
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True
