"""The chart's alerts and dashboard read metrics that Baton really exports.

Worker metric names come from baton/worker/runtime/metrics.py, operator ones from
baton/operator/metrics.py; a rename there without the same rename in the PrometheusRule or
the dashboard fails here. Also the operator metrics' own behaviour and HTTP endpoint.
"""

from __future__ import annotations

import json
import re
import socket
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from baton.operator.metrics import ENV_PORT, OperatorMetrics, serve_from_env
from baton.worker.runtime.metrics import Metrics
from baton.worker.runtime.store_metrics import StoreMetrics
from tests.support.helm import CHART, one, render

pytestmark = pytest.mark.unit

ALERTS = {
    "BatonConsumerLagHigh",
    "BatonStandbyLagHigh",
    "BatonDeadLetterRecords",
    "BatonFlipFailed",
    "BatonRestoreStuck",
    "BatonCompactionIncomplete",
    "BatonCompactionStale",
    "BatonStreamAppStalled",
    "BatonStandbyNotReady",
}


def exported_names(registry: CollectorRegistry) -> set[str]:
    """Every series name a registry can expose, whether or not a label set was used yet."""
    names: set[str] = set()
    for family in registry.collect():
        suffixes = {"counter": ["_total", "_created"], "histogram": ["_bucket", "_sum", "_count", "_created"]}
        names |= {family.name + s for s in suffixes.get(family.type, [""])}
    return names


def known_metrics() -> set[str]:
    worker = Metrics("app").registry
    worker.register(StoreMetrics(list))  # as the worker does: the stores' sizes, read at scrape time
    return exported_names(worker) | exported_names(OperatorMetrics().registry)


def referenced(text: str) -> set[str]:
    return set(re.findall(r"\bbaton_[a-z0-9_]+", text))


def rendered_rule() -> dict[str, Any]:
    objs = render(
        {"metrics.prometheusRule.enabled": "true", "metrics.prometheusRule.thresholds.consumerLag": "777"}
    )
    return one(objs, "PrometheusRule")


def test_prometheus_rule_has_the_alerts_with_thresholds_filled_in() -> None:
    rule = rendered_rule()
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    assert set(alerts) >= ALERTS
    assert alerts["BatonConsumerLagHigh"]["expr"].endswith("> 777")
    assert alerts["BatonRestoreStuck"]["for"] == "15m"
    assert alerts["BatonCompactionStale"]["expr"].endswith("> 172800")
    assert "@" not in json.dumps(rule), "a threshold placeholder was left unfilled"
    for alert in alerts.values():
        assert alert["labels"]["severity"] in ("warning", "critical")
        assert "{{ $labels." in alert["annotations"]["summary"] or alert["alert"] == "BatonOperatorAbsent"


def test_alerts_and_dashboard_use_only_exported_metrics() -> None:
    known = known_metrics()
    rules = (CHART / "files" / "prometheus-rules.yaml").read_text()
    dashboard = (CHART / "files" / "grafana-dashboard.json").read_text()
    assert referenced(rules) - known == set()
    assert referenced(dashboard) - known == set()
    # Each alert topic is backed by its metric.
    for name in (
        "baton_consumer_lag_records",
        "baton_standby_lag_records",
        "baton_dlq_records_total",
        "baton_operator_flips_total",
        "baton_restored_records_total",
    ):
        assert name in referenced(rules)


def test_dashboard_is_valid_grafana_json() -> None:
    dash = json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    assert dash["uid"] == "baton-streamapps"
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids)), "panel ids must be unique"
    variables = {v["name"] for v in dash["templating"]["list"]}
    assert variables == {"datasource", "namespace", "app"}
    for panel in dash["panels"]:
        if panel["type"] == "row":
            continue
        assert panel["targets"], panel["title"]
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24
    configmap = one(render({"metrics.dashboard.enabled": "true"}), "ConfigMap")
    assert configmap["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert json.loads(configmap["data"]["baton.json"]) == dash


def test_operator_metrics_count_time_and_track_phase() -> None:
    m = OperatorMetrics()
    with m.reconciling("apps"):
        pass
    with pytest.raises(RuntimeError), m.reconciling("apps"):
        raise RuntimeError("api down")
    m.flip_finished("apps", "clicks", "committed", 0.2)
    m.flip_finished("apps", "clicks", "aborted", 10.0)
    m.deploy_finished("apps", "clicks", "promoted", 95.0)
    m.observe_status(
        "apps",
        "clicks",
        {"phase": "Deploying", "lag": 12, "conditions": [{"type": "Ready", "status": "False"}]},
    )
    m.observe_status(
        "apps",
        "clicks",
        {
            "phase": "Stable",
            "conditions": [
                {"type": "Ready", "status": "True"},
                {"type": "Stalled", "status": "True", "reason": "PodsFailing"},  # the standby crash-loops
                {"type": "StandbyReady", "status": "False"},
            ],
        },
    )
    get = m.registry.get_sample_value
    assert get("baton_operator_reconciles_total", {"namespace": "apps", "result": "ok"}) == 1
    assert get("baton_operator_reconciles_total", {"namespace": "apps", "result": "error"}) == 1
    assert get("baton_operator_reconcile_duration_seconds_count", {"namespace": "apps"}) == 2
    assert (
        get("baton_operator_flips_total", {"namespace": "apps", "name": "clicks", "outcome": "aborted"}) == 1
    )
    assert get("baton_operator_flip_duration_seconds_sum", {"namespace": "apps"}) == pytest.approx(10.2)
    assert (
        get("baton_operator_deploys_total", {"namespace": "apps", "name": "clicks", "outcome": "promoted"})
        == 1
    )
    phase = {"namespace": "apps", "name": "clicks"}
    assert get("baton_operator_app_phase", {**phase, "phase": "Stable"}) == 1
    assert get("baton_operator_app_phase", {**phase, "phase": "Deploying"}) == 0
    assert get("baton_operator_app_ready", phase) == 1
    assert get("baton_operator_app_stalled", phase) == 1, "PodsFailing is Stalled whatever the phase"
    assert get("baton_operator_app_standby_ready", phase) == 0
    assert get("baton_operator_app_lag_records", phase) == 12
    assert get("baton_operator_autoscaling_desired_replicas", phase) is None  # no spec.autoscaling
    m.observe_status("apps", "clicks", {"phase": "Stable", "autoscaling": {"current": 2, "desired": 4}})
    assert get("baton_operator_autoscaling_current_replicas", phase) == 2
    assert get("baton_operator_autoscaling_desired_replicas", phase) == 4
    m.observe_status("apps", "clicks", {"phase": "Stable"})  # autoscaling removed from the spec
    assert get("baton_operator_autoscaling_desired_replicas", phase) is None
    m.observe_status("apps", "clicks", {"phase": "Stable", "autoscaling": {"current": 3, "desired": 3}})
    m.forget("apps", "clicks")
    assert get("baton_operator_autoscaling_current_replicas", phase) is None
    assert get("baton_operator_app_phase", {**phase, "phase": "Stable"}) is None
    assert get("baton_operator_app_ready", phase) is None
    assert get("baton_operator_app_stalled", phase) is None


def test_metrics_endpoint_serves_from_the_environment_variable() -> None:
    """The chart sets BATON_OPERATOR_METRICS_PORT; the endpoint answers on it."""
    assert serve_from_env({}) is None
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    m = OperatorMetrics()
    m.flip_finished("apps", "clicks", "committed", 0.3)
    assert serve_from_env({ENV_PORT: str(port)}, m) == port
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert 'baton_operator_flips_total{name="clicks",namespace="apps",outcome="committed"} 1.0' in body
    deployment = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": ENV_PORT, "value": "8080"} in deployment["env"]
    assert Path(CHART / "templates" / "service.yaml").exists()
