"""`make demo`'s path with the real image: the chart's operator and the click counter's Pods
run from the runtime image built from the Dockerfile, under runc, through a blue-green
deploy, and the counts come out exact (the demo exits 0 only then)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
from batondev.paths import REPO, RUN

pytestmark = pytest.mark.e2e


def test_the_demo_runs_operator_and_workers_from_the_image_under_runc(
    kafka_bootstrap: str, kube: object, runtime_image: str
) -> None:
    operator_dir = RUN / "podrunner" / "baton-system"
    shutil.rmtree(operator_dir, ignore_errors=True)  # only this run's operator logs below
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "dev"), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-m", "batondev.demo", "--runtime", "runc", "--events", "3000", "--keep-stack"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert out.returncode == 0, f"the demo failed:\n{out.stdout[-4000:]}\n{out.stderr[-4000:]}"
    assert "counts EXACT" in out.stdout and "phase Stable       active green" in out.stdout
    assert runtime_image in out.stdout  # the image this tree's tests built, not another
    operator_logs = list(operator_dir.glob("*/operator.log"))
    assert any("[runc] baton operator" in p.read_text() for p in operator_logs), (
        "the operator ran from the image"
    )
