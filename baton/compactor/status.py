"""The audit's summary in the StreamApp's status: the patch (pure) and the call that sends it.

The compactor writes ``status.compaction`` itself, with its own field manager, rather than
leaving it to the operator: the report lives in the snapshot store (a PVC or a bucket the
operator never mounts), and the Job is the one thing that has it. The operator's status writes
are server-side applies of the fields it owns, so they leave this one alone; the operator
reads it back to export the ``baton_compaction_*`` gauges (baton/operator/metrics.py).

The Job's ServiceAccount may get and patch StreamApps' status in its namespace only (bound by
the operator, next to the CronJob, to the compactor ClusterRole the chart ships).
"""

from __future__ import annotations

import logging
from typing import Any

from baton.operator.core.constants import API_VERSION, KIND

FIELD_MANAGER = "baton-compactor"
log = logging.getLogger("baton.compactor")


def compaction_status(report: dict[str, Any], finished_at: str, report_uri: str) -> dict[str, Any]:
    """``status.compaction`` from a run's report (the CRD documents each field)."""
    summary = report["summary"]
    return {
        "lastRunTime": finished_at,
        "seconds": report["seconds"],
        "reportUri": report_uri,
        "partitions": summary["partitions"],
        "snapshotsWritten": summary["snapshots_written"],
        "recordsRead": summary["records_read"],
        "liveKeys": summary["live_keys"],
        "compactionLag": summary["compaction_lag"],
        "tombstones": summary["tombstones"],
        "bytes": summary["bytes"],
        "findings": summary["findings"],
        "findingKinds": list(summary["finding_kinds"]),
        # reports written before these fields existed have neither
        "notCompared": summary.get("not_compared", 0),
        "notComparedReasons": list(summary.get("not_compared_reasons", [])),
    }


def parse_streamapp(ref: str) -> tuple[str, str]:
    """``NAMESPACE/NAME`` as given to ``--streamapp``."""
    namespace, sep, name = ref.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(f"expected NAMESPACE/NAME, got {ref!r}")
    return namespace, name


def write_status(namespace: str, name: str, status: dict[str, Any]) -> None:
    """Server-side apply ``status.compaction`` of one StreamApp, in-cluster or with KUBECONFIG."""
    from kubernetes import config, dynamic
    from kubernetes.client import ApiClient

    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    client = dynamic.DynamicClient(ApiClient())  # type: ignore[no-untyped-call]
    resource = client.resources.get(api_version=API_VERSION, kind=KIND)
    body = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {"name": name, "namespace": namespace},
        "status": {"compaction": status},
    }
    resource.status.server_side_apply(
        body=body, name=name, namespace=namespace, field_manager=FIELD_MANAGER, force_conflicts=True
    )
    log.info("status.compaction of StreamApp %s/%s written: %d findings", namespace, name, status["findings"])
