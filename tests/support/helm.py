"""The Helm chart: rendered offline for unit tests, installed on the stack for integration tests."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from batondev import gobuild
from batondev.paths import REPO

from tests.conftest import Kube
from tests.support.durations import cli_deadline
from tests.support.operator import (
    KubectlFn,
    get_json,
    install_crds,
)

CHART = REPO / "charts" / "baton"


def render(values: dict[str, str] | None = None, *extra: str, namespace: str = "baton-system") -> list[Obj]:
    """The chart's objects for ``--set key=value`` pairs (JSON values go through --set-json)."""
    out = helm("template", "rel", str(CHART), "-n", namespace, *set_args(values or {}), *extra)
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(objs: list[Obj], kind: str, name: str | None = None, namespace: str | None = None) -> Obj:
    found = find(objs, kind, name, namespace)
    assert len(found) == 1, f"expected one {kind} {name or ''} in {namespace}, got {len(found)}"
    return found[0]


@dataclass(frozen=True)
class Helm:
    kube: Kube

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(self.kube.helm), f"--kubeconfig={self.kube.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=cli_deadline(args, floor=180),
        )
        if check and out.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
        return out

    def install(self, release: str, namespace: str, *sets: str) -> str:
        """`helm install` (no --wait: the Pods never run here); returns the NOTES."""
        install_flags = [f"--set={s}" if not s.startswith("--") else s for s in sets]
        out = self("install", release, str(CHART), "-n", namespace, *install_flags, "--timeout=120s")
        return out.stdout


# The chart tests' fixtures (tests/integration: the install test and the security tests that
# install the chart). A test module takes them by assignment, `helm = chart.stack_helm` and
# `release = chart.release`: pytest finds a fixture among a test module's names, and an import
# of a name a test's argument shadows is an unused import to ruff. The fixture is named
# `helm` but defined as `stack_helm`: this module's `helm` runs helm offline.
@pytest.fixture(name="helm")
def stack_helm(kube: Kube, kubectl: KubectlFn) -> Helm:
    """Helm on the stack's API server, with the CRDs installed."""
    install_crds(kubectl)  # shared with other tests; helm skips CRDs that already exist
    return Helm(kube)


@pytest.fixture
def release(helm: Helm, namespace: str) -> Iterator[str]:
    """A release name unique to the test; uninstalled afterwards if the test did not."""
    name = f"b{namespace[-6:]}"
    yield name
    helm("uninstall", name, "-n", namespace, "--wait", "--timeout=60s", check=False)


def pods_of(kubectl: KubectlFn, namespace: str, selector: str) -> list[dict[str, Any]]:
    return list(get_json(kubectl, "pods", "-n", namespace, "-l", selector)["items"])


def failed_create_events(kubectl: KubectlFn, namespace: str) -> list[str]:
    events = get_json(kubectl, "events", "-n", namespace)["items"]
    return [
        f"{e['involvedObject']['kind']}/{e['involvedObject']['name']}: {e['message']}"
        for e in events
        if e.get("reason") == "FailedCreate"
    ]


Obj = dict[str, Any]


def helm_bin() -> Path:
    helm = gobuild.helm_dir() / "bin" / "helm"
    if not helm.exists():
        pytest.fail(f"helm is not installed at {helm}: run `dev/stack up helm` once", pytrace=False)
    return helm


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([str(helm_bin()), *args], capture_output=True, text=True, timeout=60)
    if check and out.returncode != 0:
        raise AssertionError(f"helm {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}")
    return out


def set_args(values: dict[str, str]) -> list[str]:
    return [a for k, v in values.items() for a in ("--set-json" if v[:1] in "[{" else "--set", f"{k}={v}")]


def find(objs: list[Obj], kind: str, name: str | None = None, namespace: str | None = None) -> list[Obj]:
    return [
        o
        for o in objs
        if o["kind"] == kind
        and (name is None or o["metadata"]["name"] == name)
        and (namespace is None or o["metadata"].get("namespace") == namespace)
    ]
