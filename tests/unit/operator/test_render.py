"""`baton render` prints the operator's objects for a manifest, without a cluster."""

from __future__ import annotations

import pytest
import yaml
from batondev.paths import EXAMPLE
from click.testing import CliRunner

from baton.cli import main

pytestmark = pytest.mark.unit


def test_render_the_example_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent")  # proves no cluster is consulted
    result = CliRunner().invoke(main, ["render", str(EXAMPLE), "-n", "shop"])
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.output))
    kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert ("StatefulSet", "click-counter-blue") in kinds and ("StatefulSet", "click-counter-green") in kinds
    assert all(d["metadata"]["namespace"] == "shop" for d in docs)


def test_render_with_rbac() -> None:
    result = CliRunner().invoke(main, ["render", str(EXAMPLE), "--rbac", "baton-system"])
    assert result.exit_code == 0, result.output
    kinds = [d["kind"] for d in yaml.safe_load_all(result.output)]
    assert kinds[:3] == ["ServiceAccount", "ClusterRole", "ClusterRoleBinding"]


def test_render_refuses_a_bad_spec(tmp_path: pytest.TempPathFactory) -> None:
    bad = tmp_path / "bad.yaml"  # type: ignore[operator]
    bad.write_text(
        "apiVersion: baton.dev/v1alpha1\nkind: StreamApp\nmetadata: {name: x}\n"
        "spec: {image: i, topology: 'a:b', kafka: {bootstrapServers: 'k:1'}, replicas: 'many'}\n"
    )
    result = CliRunner().invoke(main, ["render", str(bad)])
    assert result.exit_code != 0
    assert "replicas" in result.output
