"""dev/stack's promises: idempotent up, a busy port is reported (not a hang), a missing tool is named."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from batondev.paths import REPO

pytestmark = pytest.mark.integration

STACK = REPO / "dev" / "stack"


def _stack(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(STACK), *args], capture_output=True, text=True, timeout=timeout, env=env or dict(os.environ)
    )


def test_up_twice_is_harmless_and_status_reports_running(kafka_bootstrap: str) -> None:
    first = _stack("up", "kafka")
    second = _stack("up", "kafka")
    assert first.returncode == 0, first.stderr
    assert second.returncode == 0, second.stderr
    status = _stack("status")
    kafka_line = next(line for line in status.stdout.splitlines() if line.startswith("kafka"))
    assert "running" in kafka_line
    assert kafka_bootstrap in kafka_line


def test_env_prints_exports_for_clients(kafka_bootstrap: str) -> None:
    out = _stack("env")
    assert out.returncode == 0
    assert f"export BATON_KAFKA_BOOTSTRAP={kafka_bootstrap}" in out.stdout
    assert "export KUBECONFIG=" in out.stdout
    assert "kubernetes-" in out.stdout and "helm-" in out.stdout


def test_port_in_use_is_reported_not_a_hang(tmp_path: Path, kafka_bootstrap: str) -> None:
    # a second stack on another port base, with a foreign listener on its Kafka port
    base = 41000
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("127.0.0.1", base + 2))
        squatter.listen()
        env = dict(os.environ, BATON_PORT_BASE=str(base), BATON_RUN_DIR=str(tmp_path / "run"))
        started = time.monotonic()
        out = _stack("up", "kafka", env=env, timeout=120)
        elapsed = time.monotonic() - started
    assert out.returncode == 1
    assert f"port(s) {base + 2} on 127.0.0.1 are already in use" in out.stderr
    assert elapsed < 60, f"a busy port must fail fast, took {elapsed:.0f}s"


def test_missing_java_is_named_with_install_step(tmp_path: Path, kafka_bootstrap: str) -> None:
    # only the venv's python on PATH: no java, no mvn, no go
    venv_bin = Path(sys.executable).parent
    env = {
        "HOME": os.environ["HOME"],
        "PATH": str(venv_bin),
        "BATON_PORT_BASE": "41100",
        "BATON_RUN_DIR": str(tmp_path / "run"),
        "PYTHONPATH": str(REPO / "dev"),
    }
    out = subprocess.run(
        [sys.executable, "-m", "batondev.stack", "up", "kafka"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert out.returncode == 1
    assert "`java` is not on PATH" in out.stderr
    assert "apt-get install -y openjdk-17-jdk-headless" in out.stderr
