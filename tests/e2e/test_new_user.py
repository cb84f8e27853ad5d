"""An app author's first hour, as they would spend it: the wheel in a fresh virtualenv, an app
and its test on the test driver with no server at all, then ``baton run`` against a Kafka.

Nothing of the repo leaks in: the virtualenv is new (uv, its package cache under
``~/.cache/baton/uv-cache`` so CI reuses the downloads), ``PYTHONPATH`` and every
``BATON_*`` variable are cleared, and the app lives in a folder of its own. The wheel is
built from this checkout without build isolation (the dev venv's setuptools), so the test
needs no index beyond what the cache holds once it is warm.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from batondev import paths
from batondev.imagelock import uv
from batondev.paths import REPO

from baton.testing import latest_by_key, produce, read_all, wait_for

pytestmark = pytest.mark.e2e

APP = textwrap.dedent(
    """
    from baton import JSON, STR, Topology

    topology = Topology()
    (
        topology.stream("orders", key=STR, value=JSON)
        .filter(lambda _customer, order: order["amount"] > 0)
        .group_by_key()
        .count(store="orders-per-customer")
        .to_stream()
        .to("order-counts", value=JSON)
    )
    """
)

APP_TEST = textwrap.dedent(
    """
    from baton.testing import TopologyTestDriver

    from app import topology


    def test_counts_orders_and_skips_refunds() -> None:
        with TopologyTestDriver(topology) as driver:
            orders = driver.input_topic("orders")
            counts = driver.output_topic("order-counts")
            orders.pipe("ann", {"amount": 10})
            orders.pipe("ann", {"amount": -10})
            orders.pipe("bob", {"amount": 5})
            orders.pipe("ann", {"amount": 7})
            assert counts.read_key_values() == [("ann", 1), ("bob", 1), ("ann", 2)]
            assert driver.key_value_store("orders-per-customer")["ann"] == 2
    """
)


def _user_env() -> dict[str, str]:
    """The environment of someone who never cloned Baton."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BATON_") and k != "PYTHONPATH"}
    env["UV_CACHE_DIR"] = str(paths.CACHE / "uv-cache")
    return env


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A new virtualenv with the built wheel and pytest, as ``pip install baton-streams`` gives."""
    work = tmp_path_factory.mktemp("new-user")
    dist = work / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(dist), str(REPO)],
        check=True,
    )  # fmt: skip
    (wheel,) = dist.glob("baton_streams-*.whl")
    venv = work / "venv"
    env = _user_env()
    subprocess.run([str(uv()), "venv", "--quiet", "--python", sys.executable, str(venv)], check=True, env=env)
    subprocess.run(
        [
            str(uv()),
            "pip",
            "install",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            str(wheel),
            "pytest",
        ],
        check=True,
        env=env,
    )
    return venv


def test_the_wheel_alone_runs_an_apps_test_without_a_broker(fresh_venv: Path, tmp_path: Path) -> None:
    project = tmp_path / "myapp"
    project.mkdir()
    (project / "app.py").write_text(APP)
    (project / "test_app.py").write_text(APP_TEST)
    env = _user_env() | {"BATON_BOOTSTRAP_SERVERS": "127.0.0.1:1"}  # nothing listens: no broker is used
    done = subprocess.run(
        [str(fresh_venv / "bin" / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_app.py"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed" in done.stdout
    where = subprocess.run(
        [str(fresh_venv / "bin" / "python"), "-c", "import baton; print(baton.__file__)"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert str(fresh_venv) in where, f"baton imported from {where}, not the wheel"
    for extra in ("kopf", "pyspark"):  # the operator's and the compactor's extras stay out
        missing = subprocess.run([str(fresh_venv / "bin" / "python"), "-c", f"import {extra}"], env=env)
        assert missing.returncode != 0, f"{extra} came with the plain install"


def test_the_same_app_runs_with_baton_run_against_kafka(
    fresh_venv: Path, tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str
) -> None:
    source = new_topic(3, name=f"{unique_name}-orders")
    sink = new_topic(3, name=f"{unique_name}-order-counts")
    project = tmp_path / "myapp"
    project.mkdir()
    (project / "app.py").write_text(
        APP.replace('"orders"', repr(source)).replace('"order-counts"', repr(sink))
    )
    produce(
        kafka_bootstrap,
        source,
        [(b"ann", b'{"amount": 10}'), (b"ann", b'{"amount": -1}'), (b"bob", b'{"amount": 2}')],
    )
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            [str(fresh_venv / "bin" / "baton"), "run", "app.py", "--bootstrap-servers", kafka_bootstrap,
             "--application-id", unique_name, "--metrics-port", "0", "--state-dir", "state"],
            cwd=project, env=_user_env(), stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:

        def both_counted() -> dict[bytes | None, bytes | None] | None:
            latest = latest_by_key(read_all(kafka_bootstrap, sink, timeout=5))
            return latest if {b"ann", b"bob"} <= set(latest) else None

        counts = wait_for(
            "the worker counted the orders", both_counted, timeout=90, detail=lambda: log.read_text()[-3000:]
        )
        assert counts == {b"ann": b"1", b"bob": b"1"}  # the refund was filtered out
    finally:
        worker.terminate()
        worker.wait(60)
