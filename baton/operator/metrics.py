"""Prometheus metrics of the operator: reconciles, deploys, flips and each app's phase.

The Helm chart's alerts (charts/baton/files/prometheus-rules.yaml) and dashboard read these
names; tests/unit/artifacts/test_chart_monitoring.py fails when one of them goes missing here.

The metrics live in a registry of their own (tests create several operators in one
process). :func:`serve_from_env` starts the HTTP endpoint on ``BATON_OPERATOR_METRICS_PORT``,
which the chart sets; the operator calls it once at start-up.

Labels are ``namespace`` and ``name`` (the StreamApp), so alerts can say which app. Only the
replica holding the Lease runs kopf, so only it exports per-app series; a follower exports
``baton_operator_leader 0`` and nothing per app, and a leader that loses the Lease exits, so
no stale gauge of a former leader can fire an alert (see baton.operator.leader).
"""

from __future__ import annotations

import datetime
import os
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final, Literal, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

ENV_PORT: Final = "BATON_OPERATOR_METRICS_PORT"

# status.phase values the operator writes (baton/operator/core/status.py and the deploy machine).
PHASES: Final = (
    "Pending",
    "Deploying",
    "Promoting",
    "Flipping",
    "RollingBack",
    "Stable",
    "Paused",
    "Stalled",
)

DeployOutcome = Literal["promoted", "abandoned", "rolled_back"]
FlipOutcome = Literal["committed", "aborted", "failed"]

_DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
_FLIP_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60)
_DEPLOY_BUCKETS = (10, 30, 60, 120, 300, 600, 1200, 1800, 3600)


class OperatorMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.reconciles = Counter(
            "baton_operator_reconciles",
            "Reconciliations of a StreamApp, by result (ok, error)",
            ["namespace", "result"],
            registry=r,
        )
        self.reconcile_duration = Histogram(
            "baton_operator_reconcile_duration_seconds",
            "Duration of one reconciliation",
            ["namespace"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.deploys = Counter(
            "baton_operator_deploys",
            "Finished deploys, by outcome (promoted, abandoned, rolled_back)",
            ["namespace", "name", "outcome"],
            registry=r,
        )
        self.deploy_duration = Histogram(
            "baton_operator_deploy_duration_seconds",
            "From a spec change to its promotion or abandonment",
            ["namespace"],
            buckets=_DEPLOY_BUCKETS,
            registry=r,
        )
        self.flips = Counter(
            "baton_operator_flips",
            "Flips, by outcome (committed, aborted, failed)",
            ["namespace", "name", "outcome"],
            registry=r,
        )
        self.flip_duration = Histogram(
            "baton_operator_flip_duration_seconds",
            "From prepare to commit or abort of a flip",
            ["namespace"],
            buckets=_FLIP_BUCKETS,
            registry=r,
        )
        self.leader = Gauge(
            "baton_operator_leader",
            "1 while this replica holds the operator's Lease (only the leader reconciles and exports per-app series)",
            registry=r,
        )
        self.app_phase = Gauge(
            "baton_operator_app_phase",
            "1 for the StreamApp's current status.phase, 0 for the others",
            ["namespace", "name", "phase"],
            registry=r,
        )
        self.app_ready = Gauge(
            "baton_operator_app_ready",
            "1 when the StreamApp's Ready condition is True",
            ["namespace", "name"],
            registry=r,
        )
        self.app_stalled = Gauge(
            "baton_operator_app_stalled",
            "1 when the StreamApp's Stalled condition is True (status.message says why: a refused spec, "
            "an abandoned deploy, Pods crash-looping or unable to pull their image)",
            ["namespace", "name"],
            registry=r,
        )
        self.app_standby_ready = Gauge(
            "baton_operator_app_standby_ready",
            "1 when the idle color runs its revision with every Pod ready (StandbyReady)",
            ["namespace", "name"],
            registry=r,
        )
        self.app_lag = Gauge(
            "baton_operator_app_lag_records",
            "Consumer lag of the active color, as the operator last read it",
            ["namespace", "name"],
            registry=r,
        )
        self.autoscaling_current = Gauge(
            "baton_operator_autoscaling_current_replicas",
            "spec.autoscaling: the active color's replicas as the autoscaler set them (status.autoscaling.current)",
            ["namespace", "name"],
            registry=r,
        )
        self.autoscaling_desired = Gauge(
            "baton_operator_autoscaling_desired_replicas",
            "spec.autoscaling: the replicas the load needs now (status.autoscaling.desired; reason says why)",
            ["namespace", "name"],
            registry=r,
        )

        self.compaction_findings = Gauge(
            "baton_operator_compaction_findings",
            "Audit findings of the app's last compaction run (status.compaction, written by the Job)",
            ["namespace", "name"],
            registry=r,
        )
        self.compaction_lag = Gauge(
            "baton_operator_compaction_lag_records",
            "Changelog records a restore reads beyond the live keys, at the last compaction run",
            ["namespace", "name"],
            registry=r,
        )
        self.compaction_not_compared = Gauge(
            "baton_operator_compaction_not_compared",
            "Audits the app's last compaction run could not do (status.compaction.notComparedReasons)",
            ["namespace", "name"],
            registry=r,
        )
        self.compaction_last_run = Gauge(
            "baton_operator_compaction_last_run_timestamp_seconds",
            "When the app's last compaction run finished (Unix time)",
            ["namespace", "name"],
            registry=r,
        )

        self.compaction_job_failed = Gauge(
            "baton_operator_compaction_job_failed",
            "1 when the app's newest finished compaction Job failed (its Failed condition), 0 when it completed",
            ["namespace", "name"],
            registry=r,
        )

    @contextmanager
    def reconciling(self, namespace: str) -> Iterator[None]:
        """Count and time one reconciliation; an exception counts as an error and propagates."""
        start = time.monotonic()
        result = "error"
        self.reconciles.labels(namespace, "ok")
        self.reconciles.labels(namespace, "error")  # from 0, so rate() sees the first one
        try:
            yield
            result = "ok"
        finally:
            self.reconciles.labels(namespace, result).inc()
            self.reconcile_duration.labels(namespace).observe(time.monotonic() - start)

    def deploy_finished(self, namespace: str, name: str, outcome: DeployOutcome, seconds: float) -> None:
        self.deploys.labels(namespace, name, outcome).inc()
        self.deploy_duration.labels(namespace).observe(seconds)

    def flip_finished(self, namespace: str, name: str, outcome: FlipOutcome, seconds: float) -> None:
        self.flips.labels(namespace, name, outcome).inc()
        self.flip_duration.labels(namespace).observe(seconds)

    def observe_status(self, namespace: str, name: str, status: Mapping[str, Any]) -> None:
        """Per-app gauges from the status the operator just wrote."""
        for deploy_outcome in get_args(DeployOutcome):  # from 0, so increase() sees the first one
            self.deploys.labels(namespace, name, deploy_outcome)
        for flip_outcome in get_args(FlipOutcome):
            self.flips.labels(namespace, name, flip_outcome)
        phase = str(status.get("phase") or "Pending")
        for known in {*PHASES, phase}:
            self.app_phase.labels(namespace, name, known).set(1 if known == phase else 0)
        true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
        self.app_ready.labels(namespace, name).set(1 if "Ready" in true else 0)
        self.app_stalled.labels(namespace, name).set(1 if "Stalled" in true else 0)
        self.app_standby_ready.labels(namespace, name).set(1 if "StandbyReady" in true else 0)
        if status.get("lag") is not None:
            self.app_lag.labels(namespace, name).set(float(status["lag"]))
        scaling = status.get("autoscaling") or {}
        for gauge, key in ((self.autoscaling_current, "current"), (self.autoscaling_desired, "desired")):
            if scaling.get(key) is not None:
                gauge.labels(namespace, name).set(float(scaling[key]))
            elif (namespace, name) in set(_label_sets(gauge)):  # autoscaling turned off
                gauge.remove(namespace, name)

    def observe_compaction(self, namespace: str, name: str, compaction: Mapping[str, Any] | None) -> None:
        """Gauges from ``status.compaction``, which the compactor Job writes (not the operator)."""
        if not compaction:
            return
        self.compaction_findings.labels(namespace, name).set(float(compaction.get("findings") or 0))
        self.compaction_lag.labels(namespace, name).set(float(compaction.get("compactionLag") or 0))
        self.compaction_not_compared.labels(namespace, name).set(float(compaction.get("notCompared") or 0))
        finished = compaction.get("lastRunTime")
        if finished:
            stamp = datetime.datetime.fromisoformat(str(finished).replace("Z", "+00:00")).timestamp()
            self.compaction_last_run.labels(namespace, name).set(stamp)

    def observe_compaction_job(self, namespace: str, name: str, failed: bool) -> None:
        self.compaction_job_failed.labels(namespace, name).set(1 if failed else 0)

    def forget(self, namespace: str, name: str) -> None:
        """Drop a deleted app's per-app series, so dashboards do not show it forever."""
        for gauge in (
            self.app_phase,
            self.app_ready,
            self.app_stalled,
            self.app_standby_ready,
            self.app_lag,
            self.autoscaling_current,
            self.autoscaling_desired,
            self.compaction_findings,
            self.compaction_lag,
            self.compaction_not_compared,
            self.compaction_last_run,
            self.compaction_job_failed,
        ):
            for labels in list(_label_sets(gauge)):
                if labels[:2] == (namespace, name):
                    gauge.remove(*labels)


def _label_sets(gauge: Gauge) -> Iterator[tuple[str, ...]]:
    for metric in gauge.collect():
        for sample in metric.samples:
            keys = ("namespace", "name", "phase") if "phase" in sample.labels else ("namespace", "name")
            yield tuple(sample.labels[k] for k in keys)


METRICS: Final = OperatorMetrics()


def serve_from_env(environ: Mapping[str, str] = os.environ, metrics: OperatorMetrics = METRICS) -> int | None:
    """Serve /metrics on ``BATON_OPERATOR_METRICS_PORT`` (all interfaces); the port, or None if unset."""
    raw = environ.get(ENV_PORT, "").strip()
    if not raw:
        return None
    port = int(raw)
    start_http_server(port, registry=metrics.registry)
    return port
