"""The chart's alerts, checked and run by Prometheus' own engine (promtool, from the Go module proxy).

`promtool check rules` refuses a rule Prometheus would refuse. `promtool test rules` feeds each
alert the series it reads, labelled as the chart's monitors store them (workers by the
PodMonitor's relabelling, the operator's per-app series with their own `namespace` kept by the
ServiceMonitor's honorLabels), and checks that the alert fires, when, and for which app: every
one carries the app's namespace, never the operator's.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from batondev import gobuild

from tests.support.helm import one, render

pytestmark = pytest.mark.unit

APP_NS = "apps"
WORKER = f'namespace="{APP_NS}",app="clicks",color="blue",pod="clicks-blue-0"'
# the operator's per-app series: its own namespace label, kept (honorLabels), and the target's
OPERATOR = f'namespace="{APP_NS}",name="clicks",job="rel-baton-metrics",pod="rel-baton-0"'
WORKER_LABELS = {"namespace": APP_NS, "app": "clicks", "color": "blue"}
APP_LABELS = {"namespace": APP_NS, "name": "clicks"}

# alert -> (input series, minutes to evaluate at, labels of the firing alert besides severity)
CASES: dict[str, tuple[list[tuple[str, str]], int, dict[str, str]]] = {
    "BatonConsumerLagHigh": (
        [(f'baton_consumer_lag_records{{{WORKER},topic="clicks",partition="0"}}', "20000x20")],
        15,
        WORKER_LABELS,
    ),
    "BatonStandbyLagHigh": (
        [(f'baton_standby_lag_records{{{WORKER},task="0_0",store="counts"}}', "60000x30")],
        20,
        WORKER_LABELS,
    ),
    "BatonDeadLetterRecords": (
        [(f'baton_dlq_records_total{{{WORKER},stage="source"}}', "0+60x20")],
        12,
        WORKER_LABELS,
    ),
    "BatonRestoreStuck": (
        [
            (f'baton_tasks{{{WORKER},state="restoring"}}', "1x40"),
            (f'baton_restored_records_total{{{WORKER},task="0_0",store="counts"}}', "100x40"),
        ],
        30,
        {**WORKER_LABELS, "pod": "clicks-blue-0"},
    ),
    "BatonWorkerNotReady": (
        [(f"baton_ready{{{WORKER}}}", "0x30")],
        20,
        {**WORKER_LABELS, "pod": "clicks-blue-0"},
    ),
    "BatonFlipFailed": (
        [(f'baton_operator_flips_total{{{OPERATOR},outcome="aborted"}}', "0 0 1 1 1 1")],
        4,
        APP_LABELS,
    ),
    "BatonDeployFailed": (
        [(f'baton_operator_deploys_total{{{OPERATOR},outcome="abandoned"}}', "0 0 1 1 1 1")],
        4,
        APP_LABELS,
    ),
    "BatonStreamAppStalled": ([(f"baton_operator_app_stalled{{{OPERATOR}}}", "1x10")], 8, APP_LABELS),
    "BatonStandbyNotReady": ([(f"baton_operator_app_standby_ready{{{OPERATOR}}}", "0x40")], 35, APP_LABELS),
    "BatonReconcileErrors": (
        [
            (
                f'baton_operator_reconciles_total{{namespace="{APP_NS}",result="error",job="rel-baton-metrics"}}',
                "0+5x30",
            )
        ],
        25,
        {"namespace": APP_NS},
    ),
    "BatonCompactionFindings": (
        [(f"baton_operator_compaction_findings{{{OPERATOR}}}", "2x10")],
        8,
        APP_LABELS,
    ),
    "BatonCompactionIncomplete": (
        [(f"baton_operator_compaction_not_compared{{{OPERATOR}}}", "1x70")],
        65,
        APP_LABELS,
    ),
    "BatonCompactionFailed": (
        [(f"baton_operator_compaction_job_failed{{{OPERATOR}}}", "1x5")],
        3,
        APP_LABELS,
    ),
    # finished at time 0; two days later (172800 s), plus the rule's 10 minutes
    "BatonCompactionStale": (
        [(f"baton_operator_compaction_last_run_timestamp_seconds{{{OPERATOR}}}", "0x3000")],
        2900,
        APP_LABELS,
    ),
    "BatonOperatorAbsent": ([('up{job="something-else"}', "1x20")], 15, {}),
}


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    binary = gobuild.build_promtool() / "promtool"
    return subprocess.run([str(binary), *args], cwd=cwd, capture_output=True, text=True, timeout=300)


def _rules(tmp_path: Path, *, annotations: bool = True) -> dict[str, Any]:
    """The chart's rules as a rule file; without annotations, for tests that compare labels only
    (promtool compares an alert's annotations whole, and they are prose)."""
    rule = one(render({"metrics.prometheusRule.enabled": "true"}), "PrometheusRule")
    spec: dict[str, Any] = rule["spec"]
    written = spec
    if not annotations:
        written = {
            "groups": [
                {**g, "rules": [{k: v for k, v in r.items() if k != "annotations"} for r in g["rules"]]}
                for g in spec["groups"]
            ]
        }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(written))
    return spec


def _alerts(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for group in spec["groups"] for r in group["rules"] if "alert" in r}


def test_promtool_accepts_the_rules(tmp_path: Path) -> None:
    _rules(tmp_path)
    out = _promtool("check", "rules", "rules.yaml", cwd=tmp_path)
    assert out.returncode == 0 and "SUCCESS" in out.stdout, out.stdout + out.stderr


def test_every_alert_fires_for_the_apps_own_namespace(tmp_path: Path) -> None:
    alerts = _alerts(_rules(tmp_path, annotations=False))
    assert set(alerts) == set(CASES), "an alert without a test case here, or a case for a gone alert"
    tests = []
    for name, (series, minutes, labels) in CASES.items():
        severity = alerts[name]["labels"]["severity"]
        tests.append(
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "alert_rule_test": [
                    {
                        "eval_time": f"{minutes}m",
                        "alertname": name,
                        "exp_alerts": [{"exp_labels": {**labels, "severity": severity}}],
                    }
                ],
            }
        )
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": tests}))
    out = _promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    # and every summary names the app by the namespace label the alert carries
    for name, rule in alerts.items():
        if CASES[name][2].get("namespace"):
            assert "$labels.namespace" in rule["annotations"]["summary"], name


def test_an_alert_does_not_fire_below_its_threshold(tmp_path: Path) -> None:
    """The test above could pass with rules that always fire: quiet input keeps them quiet."""
    _rules(tmp_path)
    quiet = {
        "interval": "1m",
        "input_series": [
            {
                "series": f'baton_consumer_lag_records{{{WORKER},topic="clicks",partition="0"}}',
                "values": "10x20",
            },
            {"series": f"baton_operator_app_stalled{{{OPERATOR}}}", "values": "0x10"},
        ],
        "alert_rule_test": [
            {"eval_time": "15m", "alertname": "BatonConsumerLagHigh", "exp_alerts": []},
            {"eval_time": "8m", "alertname": "BatonStreamAppStalled", "exp_alerts": []},
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump({"rule_files": ["rules.yaml"], "tests": [quiet]}))
    out = _promtool("test", "rules", "tests.yaml", cwd=tmp_path)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
