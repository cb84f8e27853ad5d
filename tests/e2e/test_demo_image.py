"""`make demo` as a new user runs it: the chart's operator and the click counter's workers run as
Pods on the stack's node (kubelet, containerd) from the runtime image built from the Dockerfile,
through a blue-green deploy to a new image tag, and the counts come out exact (the demo exits 0
only then)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from batondev.paths import REPO

from tests.conftest import Node

pytestmark = pytest.mark.e2e


def test_the_demo_runs_operator_and_workers_as_pods_on_the_node(
    kafka_bootstrap: str, node: Node, runtime_image: str
) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "dev"), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-m", "batondev.demo", "--events", "3000", "--keep-stack"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert out.returncode == 0, f"the demo failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    assert "counts EXACT" in out.stdout and "phase Stable       active green" in out.stdout
    assert runtime_image in out.stdout  # the image this tree's tests built, not another
    assert f"(image {runtime_image}-v2)" in out.stdout  # the deploy changed the image tag
    assert "container containerd://" in out.stdout and "exec: baton --version -> baton, version" in out.stdout
    # the operator ran as a Pod on the node, from the image
    assert "operator container containerd://" in out.stdout
    assert node.name in out.stdout.split("helm install of charts/baton")[1].split("==>")[0]
