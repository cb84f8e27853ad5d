"""The operator runs with exactly the RBAC in baton/operator/rbac.py, as a real ServiceAccount."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from baton.operator.rbac import rbac_objects
from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    install_crds,
    mark_pods_ready,
    operators,
    refused_calls,
)

pytestmark = pytest.mark.integration


def _token_kubeconfig(kube: Any, kubectl: KubectlFn, namespace: str, path: Path) -> Path:
    admin = yaml.safe_load(Path(kube.kubeconfig).read_text())
    cluster = admin["clusters"][0]["cluster"]
    token = kubectl("create", "token", "baton-operator", "-n", namespace, "--duration=1h").stdout.strip()
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "sa", "user": {"token": token}}],
                "contexts": [
                    {"name": "sa", "context": {"cluster": "c", "user": "sa", "namespace": namespace}}
                ],
                "current-context": "sa",
            }
        )
    )
    return path


@pytest.fixture
def sa_operator(
    kube: Any, kubectl: KubectlFn, namespace: str, tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    install_crds(kubectl)
    for obj in rbac_objects("baton-operator", namespace, clusterwide=False):
        apply(kubectl, obj)
    kubeconfig = _token_kubeconfig(kube, kubectl, namespace, tmp_path / "sa.kubeconfig")
    yield from operators(
        tmp_path,
        namespace,
        kubeconfig,
        lambda: kubectl("delete", "sapp", "--all", "-n", namespace, "--timeout=30s", check=False),
    )


def test_operator_works_with_least_privilege(
    sa_operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    who = f"--as=system:serviceaccount:{namespace}:baton-operator"
    assert (
        kubectl("auth", "can-i", "get", "secrets", "-n", namespace, who, check=False).stdout.strip() == "no"
    )
    assert kubectl("auth", "can-i", "create", "statefulsets", "-n", namespace, who).stdout.strip() == "yes"
    op = sa_operator("--no-kafka")
    apply(kubectl, example_manifest(namespace, replicas=1, standbyReplicas=0))
    mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter", 2)
    kubectl("wait", "--for=condition=Ready", "sapp/click-counter", "-n", namespace, "--timeout=60s")
    assert not refused_calls(op.text()), op.text()[-3000:]
    events = json.loads(kubectl("get", "events", "-n", namespace, "-o", "json").stdout)["items"]
    assert any(e["reason"] == "Ready" and e["involvedObject"]["kind"] == "StreamApp" for e in events)
