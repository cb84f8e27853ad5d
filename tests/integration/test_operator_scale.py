"""The short variant of bench/operator_scale.py: at rest, a pass costs the API server nothing.

The operator reads its objects from its watches (baton.operator.cache) and applies only what
differs (baton.operator.core.drift), so a reconciliation pass of an app whose objects are as
desired makes no request, whatever the number of apps; only a changed StreamApp is read
fresh, once. Counted by the API server itself (its audit log, which `dev/stack` turns on),
by user agent, in the test's namespace. With ``--no-watch-cache`` the same passes make a
GET of every object and the test fails (shown in the note of issue 18).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable

import pytest
from batondev import audit

from baton.testing import wait_for
from tests.support.operator import KubectlFn, OperatorProcess, apply, example_manifest, try_get_json

pytestmark = pytest.mark.integration

APPS = 4


def _reconciled(kubectl: KubectlFn, namespace: str) -> bool:
    items = (try_get_json(kubectl, "sapp", "-n", namespace) or {}).get("items", [])
    return (
        sum(
            1
            for a in items
            if (a.get("status") or {}).get("observedGeneration") == a["metadata"]["generation"]
            and (a.get("status") or {}).get("colors", {}).get("green", {}).get("specHash")
        )
        == APPS
    )


def test_passes_at_rest_make_no_requests_and_a_touched_app_costs_one_read(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    op = operator("--no-kafka", "--standalone")
    names = [f"app-{i}" for i in range(APPS)]
    for name in names:
        body = example_manifest(namespace, replicas=1, standbyReplicas=0)
        body["metadata"]["name"] = name
        apply(kubectl, body)
    wait_for("every app reconciled", lambda: _reconciled(kubectl, namespace), timeout=60)
    time.sleep(3)  # the last status writes and StatefulSet controller updates settle

    # Touch every app: kopf runs on_change (a fresh read, then a pass), which wakes the
    # deploy loop (another pass). Nothing is to be applied.
    passes = op.count(r"Handler 'on_change' succeeded")
    since = time.time()
    for name in names:
        kubectl("annotate", "sapp", name, "-n", namespace, f"touched={since}")
    op.wait_log(r"Handler 'on_change' succeeded", timeout=30, after=passes + APPS - 1)
    time.sleep(3)  # the deploy loops' passes, woken by the change
    until = time.time()
    time.sleep(1)  # the audit log is written as requests finish

    ours = [r for r in audit.requests(since, until, namespace) if r.agent == "baton-operator"]
    counts = Counter((r.verb, r.resource) for r in ours)
    assert counts == Counter({("get", "streamapps"): APPS}), (
        f"a pass at rest must not read or write what the watches already show: {counts}"
    )
    assert {r.name for r in ours} == set(names)
