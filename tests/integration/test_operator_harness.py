"""The operator tests' stand-in for a kubelet is believed by the StatefulSet controller."""

from __future__ import annotations

import pytest

from baton.testing import wait_for
from tests.support.operator import KubectlFn, apply, get_json, mark_pods_ready


@pytest.mark.integration
def test_harness_marks_pods_ready_like_a_kubelet(kubectl: KubectlFn, namespace: str) -> None:
    """The StatefulSet controller counts Pods patched by mark_pods_ready as ready."""
    sts = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "probe", "namespace": namespace},
        "spec": {
            "replicas": 2,
            "serviceName": "probe",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "probe"}},
            "template": {
                "metadata": {"labels": {"app": "probe"}},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    apply(kubectl, sts)
    mark_pods_ready(kubectl, namespace, "app=probe", 2)
    wait_for(
        "statefulset readyReplicas 2",
        lambda: (
            get_json(kubectl, "statefulset", "probe", "-n", namespace).get("status", {}).get("readyReplicas")
            == 2
        ),
    )
