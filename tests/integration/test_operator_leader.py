"""Leader election through a coordination.k8s.io Lease, with real operator processes (issue 18).

Two `baton operator` replicas with a 6 s Lease: one holds it and acts, the other does nothing
and exports no per-app series. SIGKILL the leader: the follower takes over once the Lease has
expired (not before: that would be two leaders) and acts; the dead one's metrics are gone.
Then the Lease is taken from the new leader by hand: it exits within its renew deadline
instead of acting on without a lease.
"""

from __future__ import annotations

import datetime
import json
import signal
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from baton.testing import wait_for
from tests.support.operator import KubectlFn, OperatorProcess, apply, example_manifest, get_json, try_get_json

pytestmark = pytest.mark.integration

LEASE_S, RENEW_S, RETRY_S = 6, 4, 1  # tests/support/operator.py: lease_args(6)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def metrics(port: int) -> str | None:
    """The replica's /metrics, or None when nothing answers (a dead process)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=3) as response:
            return str(response.read().decode())
    except (urllib.error.URLError, ConnectionError):
        return None


def lease(kubectl: KubectlFn, namespace: str) -> dict[str, Any]:
    found = try_get_json(kubectl, "lease", "baton-operator", "-n", namespace) or {}
    return dict(found.get("spec") or {})


def stamp(value: str) -> float:
    """A Lease time as the Python client writes it (``str(datetime)``, with or without zone)."""
    parsed = datetime.datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed.timestamp()


def test_the_lease_elects_one_operator_a_killed_leader_is_replaced_and_a_deposed_one_exits(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    ports = {"a": free_port(), "b": free_port()}
    ops = {
        n: operator("--no-kafka", name=n, env={"BATON_OPERATOR_METRICS_PORT": str(p)})
        for n, p in ports.items()
    }
    wait_for("a Lease holder", lambda: lease(kubectl, namespace).get("holderIdentity"))
    # exactly one acquires; the other logs that it waits
    acquired = wait_for(
        "one leader",
        lambda: [n for n, op in ops.items() if op.count(r"leader election: acquired lease") == 1] or None,
    )
    assert len(acquired) == 1, acquired
    leader = acquired[0]
    follower = "b" if leader == "a" else "a"
    spec = lease(kubectl, namespace)
    assert spec["leaseDurationSeconds"] == LEASE_S
    assert spec["holderIdentity"].split("_")[0]  # hostname_pid_suffix: one identity per process

    apply(kubectl, example_manifest(namespace))
    wait_for(
        "the leader creates the StatefulSets",
        lambda: try_get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace),
    )
    ops[leader].wait_log(r"Handler 'on_change' succeeded", timeout=20)
    assert ops[follower].count(r"Handler 'on_change'") == 0, "the follower must not act"
    assert ops[follower].count(r"Initial authentication has finished") == 0, "kopf does not even start"
    wait_for(
        "the leader's per-app gauges",
        lambda: 'baton_operator_app_ready{name="click-counter"' in (metrics(ports[leader]) or ""),
    )
    leading, following = metrics(ports[leader]) or "", metrics(ports[follower]) or ""
    assert "baton_operator_leader 1.0" in leading
    assert "baton_operator_leader 0.0" in following
    assert "click-counter" not in following, "a follower exports no per-app series"

    # SIGKILL the leader: no goodbye, the Lease just stops being renewed.
    ops[leader].kill(signal.SIGKILL)
    last = lease(kubectl, namespace)
    assert metrics(ports[leader]) is None, "the dead leader's metrics are gone"
    apply(kubectl, example_manifest(namespace, replicas=2))
    ops[follower].wait_log(r"leader election: acquired lease", timeout=LEASE_S + 4 * RETRY_S + 10)
    taken = lease(kubectl, namespace)
    assert taken["holderIdentity"] != last["holderIdentity"]
    waited = stamp(taken["acquireTime"]) - stamp(last["renewTime"])
    # never while the old holder's Lease was valid (its renewal as seen one retry late at most),
    # and not much later than its expiry
    assert LEASE_S - RETRY_S <= waited <= LEASE_S + 3 * RETRY_S + 2, (waited, last, taken)
    wait_for(
        "the new leader applies the change",
        lambda: (
            get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)["spec"]["replicas"] == 2
        ),
        timeout=30,
    )
    wait_for(
        "the new leader's gauges",
        lambda: 'baton_operator_app_ready{name="click-counter"' in (metrics(ports[follower]) or ""),
    )
    assert "baton_operator_leader 1.0" in (metrics(ports[follower]) or "")

    # Depose it: someone else holds the Lease now. It must stop acting: it exits.
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    patch = {"spec": {"holderIdentity": "intruder", "renewTime": now, "acquireTime": now}}
    kubectl("patch", "lease", "baton-operator", "-n", namespace, "--type=merge", "-p", json.dumps(patch))
    deposed = ops[follower]
    started = time.monotonic()
    wait_for(
        "the deposed leader exits",
        lambda: deposed.proc.poll() is not None,
        timeout=RENEW_S + 4 * RETRY_S + 10,
    )
    print(
        f"takeover {waited:.1f}s after the last renewal; deposed leader exited after {time.monotonic() - started:.1f}s"
    )
    assert deposed.proc.returncode == 1
    assert deposed.count(r"lost the lease: exiting so that only one operator acts") == 1
    assert metrics(ports[follower]) is None

    # A replica started now waits out the intruder's Lease, then leads (and the fixture's
    # teardown deletes the app through it: kopf's finalizer needs a running operator).
    third = operator("--no-kafka", name="c")
    third.wait_log(r"leader election: acquired lease", timeout=LEASE_S + 4 * RETRY_S + 10)
