"""A compaction Job that fails is reported at once: a Warning Event on the StreamApp with the
Job's reason, and the gauge behind the BatonCompactionFailed alert.

The failure is the real Job controller's: a Job made from the operator's CronJob (as
``kubectl create job --from=cronjob/...`` makes one, owned by the CronJob) with a one-second
``activeDeadlineSeconds``, which kube-controller-manager fails with DeadlineExceeded.
"""

from __future__ import annotations

import socket
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from baton.operator.core.compaction.cronjob import compactor_name
from baton.testing import wait_for
from tests.support.operator import KubectlFn, OperatorProcess, apply, example_manifest, get_json, try_get_json

pytestmark = pytest.mark.integration

APP = "click-counter"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _failed_gauge(port: int) -> float | None:
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    for line in body.splitlines():
        if line.startswith("baton_operator_compaction_job_failed{") and f'name="{APP}"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_failed_compaction_job_raises_an_event_and_the_alerts_gauge(
    operator: Callable[..., OperatorProcess],
    kubectl: KubectlFn,
    namespace: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    port = _free_port()
    monkeypatch.setenv("BATON_OPERATOR_METRICS_PORT", str(port))
    op = operator("--no-kafka", "--standalone", "--verbose")  # --verbose: the watch handlers' lines
    apply(
        kubectl,
        example_manifest(namespace, compaction={"enabled": True, "snapshotStore": "/var/lib/snaps"}),
    )
    cronjob_name = compactor_name({"metadata": {"name": APP}})
    cronjob = wait_for(
        "the CronJob", lambda: try_get_json(kubectl, "cronjob", cronjob_name, "-n", namespace), 60
    )
    template = cronjob["spec"]["jobTemplate"]
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "compact-by-hand",
            "namespace": namespace,
            "labels": template["metadata"]["labels"],
            "ownerReferences": [
                {
                    "apiVersion": "batch/v1",
                    "kind": "CronJob",
                    "name": cronjob_name,
                    "uid": cronjob["metadata"]["uid"],
                    "controller": True,
                }
            ],
        },
        "spec": {**template["spec"], "activeDeadlineSeconds": 1},
    }
    assert _failed_gauge(port) is None  # no finished Job yet: no series
    apply(kubectl, job)

    def failed_event() -> list[dict[str, Any]] | None:
        events = get_json(
            kubectl,
            "events",
            "-n",
            namespace,
            f"--field-selector=involvedObject.name={APP},reason=CompactionFailed",
        )["items"]
        return events or None

    (event,) = wait_for("a CompactionFailed event", failed_event, 60)
    assert event["type"] == "Warning"
    assert "compact-by-hand" in event["message"] and "DeadlineExceeded" in event["message"]
    assert event["involvedObject"]["kind"] == "StreamApp"
    assert wait_for("the gauge", lambda: _failed_gauge(port) == 1.0, 30)
    # the operator reports each failed Job once, however many watch events it sees
    handled = op.count("Handler 'on_compaction_job' succeeded")
    kubectl("label", "job", "compact-by-hand", "-n", namespace, "touched=yes")
    op.wait_log("Handler 'on_compaction_job' succeeded", timeout=30, after=handled)
    (again,) = failed_event() or [{}]
    assert again.get("count", 1) == 1 and again["metadata"]["name"] == event["metadata"]["name"]
