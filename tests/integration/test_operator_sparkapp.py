"""runner: SparkOperator on the real API server: the operator applies the ScheduledSparkApplication
where its CRD is served, says what is missing where it is not, and moves back to a CronJob.

The CRD is the Spark Operator's own, from the chart its Go module carries (dev/batondev/
spark_operator.py); a server-side dry run with strict field validation checks the rendered
object against it, and refuses a misspelled field. tests/e2e/test_compaction_job.py runs the
operator itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from batondev import spark_operator

from baton.operator.core.compaction.sparkapp import KIND
from baton.testing import wait_for
from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    get_json,
    install_crds,
    try_get_json,
)

pytestmark = pytest.mark.integration

APP = "click-counter"
NAME = f"{APP}-compactor"
CRD = "scheduledsparkapplications.sparkoperator.k8s.io"


def _established(kubectl: KubectlFn) -> bool:
    crd = try_get_json(kubectl, "crd", CRD) or {}
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def _events(kubectl: KubectlFn, namespace: str, reason: str) -> list[str]:
    items = get_json(
        kubectl, "events", "-n", namespace, f"--field-selector=involvedObject.name={APP},reason={reason}"
    )["items"]
    return [str(e["message"]) for e in items]


def test_the_operator_runs_compaction_as_a_scheduled_spark_application(
    crd_lock: None, operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    """Deletes the cluster-wide ScheduledSparkApplication CRD, so it runs alone (``crd_lock``):
    an operator of another test watching that kind lost its watch to a 404 and stopped (kopf's
    "Multidimensional multitasker has failed"), which failed tests/e2e/test_deploy_bluegreen.py
    once in a full run."""
    kubectl("delete", "crd", CRD, "--ignore-not-found", "--wait=true", "--timeout=60s")
    operator("--no-kafka", "--standalone")
    compaction = {
        "enabled": True,
        "runner": "SparkOperator",
        "snapshotStore": "s3a://snaps/prod",
        "objectStore": {"endpoint": "http://minio:9000", "credentialsSecret": {"name": "s3-keys"}},
        "spark": {"executorMemory": "1g", "executorInstances": 2},
    }
    apply(kubectl, example_manifest(namespace, compaction=compaction))
    # no Spark Operator here: refused as a whole, with what to do
    refused = wait_for("SpecRefused", lambda: _events(kubectl, namespace, "SpecRefused"), 60)
    assert any("install the Kubeflow Spark Operator" in m for m in refused), refused
    assert (
        try_get_json(kubectl, "statefulset", f"{APP}-blue", "-n", namespace) is None
    )  # nothing half-applied

    kubectl("apply", "--server-side", "-f", str(spark_operator.crd_file("scheduledsparkapplications")))
    wait_for("the CRD established", lambda: _established(kubectl), 60)
    kubectl("annotate", "sapp", APP, "-n", namespace, "touch=1")  # a spec event: reconcile now
    ssa = wait_for(
        "the ScheduledSparkApplication",
        lambda: try_get_json(kubectl, KIND.lower(), NAME, "-n", namespace),
        60,
    )
    assert ssa["metadata"]["ownerReferences"][0]["name"] == APP
    assert ssa["spec"]["template"]["executor"]["instances"] == 2
    assert try_get_json(kubectl, "cronjob", NAME, "-n", namespace) is None
    binding = get_json(kubectl, "rolebinding", NAME, "-n", namespace)
    assert {s["name"] for s in binding["subjects"]} == {NAME, "spark-operator-spark"}
    # no Spark Operator installed for this namespace, so no driver account: said where users look
    missing = wait_for(
        "CompactionAccountMissing", lambda: _events(kubectl, namespace, "CompactionAccountMissing"), 30
    )
    assert "spark-operator-spark does not exist" in missing[0] and "spark.jobNamespaces" in missing[0]

    # strict server-side validation bites: a misspelled field is refused
    ssa["spec"]["template"]["driver"]["memry"] = "1g"
    for key in ("resourceVersion", "uid", "creationTimestamp", "managedFields", "generation"):
        ssa["metadata"].pop(key, None)
    typo = kubectl(
        "apply", "--dry-run=server", "--validate=strict", "-f", "-", input=json.dumps(ssa), check=False
    )
    assert typo.returncode != 0 and "memry" in typo.stderr, typo.stderr

    # back to a CronJob: the ScheduledSparkApplication is pruned
    kubectl(
        "patch",
        "sapp",
        APP,
        "-n",
        namespace,
        "--type=merge",
        "-p",
        '{"spec":{"compaction":{"runner":"CronJob"}}}',
    )
    wait_for("the CronJob", lambda: try_get_json(kubectl, "cronjob", NAME, "-n", namespace), 60)
    wait_for(
        "the ScheduledSparkApplication pruned",
        lambda: try_get_json(kubectl, KIND.lower(), NAME, "-n", namespace) is None,
        60,
    )


def test_sparkmaster_does_not_go_with_the_spark_operator(kubectl: KubectlFn, namespace: str) -> None:
    """Nor with Spark's Kubernetes scheduler: both run Spark on the cluster's own API server."""
    install_crds(kubectl)
    for runner in ("SparkOperator", "Kubernetes"):
        body = example_manifest(
            namespace,
            compaction={"enabled": True, "snapshotStore": "/x", "runner": runner, "sparkMaster": "local[2]"},
        )
        out = kubectl("apply", "-f", "-", input=json.dumps(body), check=False)
        assert out.returncode != 0
        assert "spec.compaction.sparkMaster applies to runner CronJob only" in out.stderr, out.stderr
