"""The operator runs with exactly the RBAC in baton/operator/core/rbac.py, as a real ServiceAccount."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    least_privilege_operators,
    mark_pods_ready,
    refused_calls,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def sa_operator(
    kube: Any, kubectl: KubectlFn, namespace: str, tmp_path: Path
) -> Iterator[Callable[..., OperatorProcess]]:
    yield from least_privilege_operators(kube, kubectl, namespace, tmp_path)


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
