"""Prometheus scrapes Baton as the chart tells it to, and every alert reads the app's namespace.

On the stack's node: the chart's operator runs as a Pod in one namespace and a StreamApp with
two workers in another. A Prometheus server (built from its Go module) gets the scrape jobs
prometheus-operator would make from the chart's ServiceMonitor and PodMonitor (honorLabels
included) and the chart's PrometheusRule. Each alert's expression is then queried with its
comparisons made ``bool`` (so a healthy app still answers with 0, instead of nothing): every one
returns series, and each carries the app's own namespace, never the operator's.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from batondev import prometheus

from baton.operator.core.compaction.jobs import COMPONENT, COMPONENT_LABEL
from baton.operator.core.constants import LABEL_APP
from baton.testing import produce, wait_for
from tests.conftest import Node
from tests.support.helm import CHART, Helm
from tests.support.operator import KubectlFn, apply, example_manifest, install_crds
from tests.support.secured import clicks

pytestmark = pytest.mark.e2e

APP = "click-counter"
COMPARISON = re.compile(r"(>=|<=|==|!=|>|<)\s*(?=[-\d.])")


def measured(expr: str) -> list[str]:
    """The queries an alert's expression is made of, each answering for every series it reads:
    comparisons with a number made ``bool``, and an ``unless``'s two sides queried apart."""
    parts = re.split(r"\bunless\s+on\s*\([^)]*\)|\bunless\b", expr)
    return [COMPARISON.sub(r"\1 bool ", part.strip()) for part in parts]


def test_prometheus_scrapes_the_operator_and_workers_and_every_alert_names_the_apps_namespace(  # noqa: PLR0917
    node: Node,
    node_runtime_image: str,
    kube: Any,
    kubectl: KubectlFn,
    namespace: str,
    kafka_bootstrap: str,
    new_topic: Any,
    unique_name: str,
    tmp_path: Path,
) -> None:
    install_crds(kubectl)
    helm = Helm(kube)
    apps = f"{namespace[:40]}-apps"
    kubectl("create", "namespace", apps)
    repository, _, tag = node_runtime_image.rpartition(":")
    values = [
        "operator.replicas=1",
        f"operator.watchNamespaces={{{apps}}}",
        f"image.repository={repository}",
        f"image.tag={tag}",
        "image.pullPolicy=Never",
        "metrics.serviceMonitor.enabled=true",
        "metrics.serviceMonitor.interval=5s",
        "metrics.podMonitor.enabled=true",
        "metrics.podMonitor.interval=5s",
        "metrics.prometheusRule.enabled=true",
    ]
    sets = [f"--set={v}" for v in values] + [
        f"--set-json=operator.tolerations={json.dumps([node.toleration])}"
    ]
    # the monitors and rules as the chart renders them (no prometheus-operator CRDs here to install them)
    rendered = helm("template", "prom", str(CHART), "-n", namespace, *sets).stdout
    monitors = [d for d in yaml.safe_load_all(rendered) if d]
    plain = [
        s for s in sets if "serviceMonitor" not in s and "podMonitor" not in s and "prometheusRule" not in s
    ]
    helm("install", "prom", str(CHART), "-n", namespace, *plain, "--timeout=120s")
    try:
        kubectl("rollout", "status", "deploy", "-n", namespace, "--timeout=300s", timeout=320)
        topic_in, topic_out = new_topic(partitions=4), new_topic(partitions=4)
        manifest = example_manifest(
            apps,
            image=node_runtime_image,
            imagePullPolicy="Never",
            kafka={"bootstrapServers": node.kafka_bootstrap},
            applicationId=unique_name,
            replicas=2,
            standbyReplicas=1,
            resources={},
            state={"store": "rocksdb", "size": "128Mi"},
            upgrade={"strategy": "Rolling"},  # one color: two worker Pods
            placement={"antiAffinity": "None"},  # two Pods on the one node
            podTemplate={
                "tolerations": [node.toleration],
                "env": [
                    {"name": "CLICKS_TOPIC", "value": topic_in},
                    {"name": "COUNTS_TOPIC", "value": topic_out},
                ],
            },
        )
        apply(kubectl, manifest)
        kubectl("wait", "--for=condition=Ready", f"sapp/{APP}", "-n", apps, "--timeout=300s", timeout=320)
        produce(kafka_bootstrap, topic_in, clicks(20, 2000))
        # what the compactor's Job writes into the status, and a finished compaction Job: the
        # operator's compaction gauges read both
        kubectl(
            "patch", "sapp", APP, "-n", apps, "--subresource=status", "--type=merge", "-p",
            json.dumps({"status": {"compaction": {
                "findings": 0, "compactionLag": 12, "notCompared": 0, "lastRunTime": "2026-11-29T00:00:00Z",
            }}}),
        )  # fmt: skip
        apply(kubectl, _finished_job(apps, node_runtime_image, node.toleration))

        scrape = prometheus.scrape_configs(monitors, Path(kube.kubeconfig))
        # the operator's job keeps its series' labels, the workers' job has none to keep
        honor = {s["job_name"].split("/")[0]: s["honor_labels"] for s in scrape}
        assert honor == {"serviceMonitor": True, "podMonitor": False}, honor
        with prometheus.server(tmp_path / "prometheus", scrape, prometheus.rule_groups(monitors)) as prom:

            def up() -> list[dict[str, Any]] | None:
                targets = [t for t in prom.targets() if t["health"] == "up"]
                return targets if len(targets) == 3 else None

            targets = wait_for(
                "the operator and both workers scraped",
                up,
                120,
                every=2,
                detail=lambda: json.dumps(
                    [(t["scrapeUrl"], t["health"], t["lastError"]) for t in prom.targets()]
                ),
            )
            jobs = sorted(t["labels"]["job"] for t in targets)
            assert jobs == sorted([f"{namespace}/prom-baton-workers"] * 2 + ["prom-baton-metrics"]), jobs
            assert {t["labels"]["namespace"] for t in targets} == {namespace, apps}
            assert all(t["scrapeInterval"] == "5s" for t in targets)

            rules = {r["name"]: r for r in prom.rules() if r["type"] == "alerting"}
            assert len(rules) == 15, sorted(rules)

            def answers() -> dict[str, list[str]] | None:
                """Per alert, the queries that return nothing yet, or series of another namespace."""
                wrong: dict[str, list[str]] = {}
                for name, rule in rules.items():
                    if name == "BatonOperatorAbsent":
                        queries = [rule["query"].removeprefix("absent(").removesuffix(")")]
                    else:
                        queries = measured(rule["query"])
                    for query in queries:
                        found = prom.query(query)
                        spaces = {s["metric"].get("namespace") for s in found}
                        expect = {namespace} if name == "BatonOperatorAbsent" else {apps}
                        if spaces != expect:
                            wrong.setdefault(name, []).append(f"{query} -> {sorted(map(str, spaces))}")
                return wrong or None

            wait_for("every alert's series, in the app's namespace", lambda: answers() is None, 180, every=5,
                     detail=lambda: json.dumps(answers(), indent=1))  # fmt: skip
            assert all(r["health"] == "ok" for r in rules.values()), [
                r.get("lastError") for r in rules.values()
            ]
            # the operator's per-app series: the app's namespace kept, no exported_namespace
            lag = wait_for("the app's lag", lambda: prom.query("baton_operator_app_lag_records"), 60, every=2)
            assert [s["metric"]["namespace"] for s in lag] == [apps] and all(
                "exported_namespace" not in s["metric"] for s in lag
            )
            # every dashboard panel's query, with the app picked: Prometheus accepts it (a refused
            # query raises) and it answers, but for the flips' durations (a Rolling app never flips)
            silent = [e for e in _dashboard_queries(apps, APP) if not prom.query(e)]
            assert all("baton_operator_flip_duration_seconds" in e for e in silent), silent
            # the workers' new series, scraped
            assert prom.query(f'sum(baton_store_estimated_keys{{namespace="{apps}",role="active"}}) > 0')
            assert prom.query(f'sum(baton_e2e_latency_seconds_count{{namespace="{apps}"}}) > 0')
    finally:
        kubectl("delete", "sapp", APP, "-n", apps, "--wait=true", "--timeout=120s", check=False, timeout=140)
        helm("uninstall", "prom", "-n", namespace, "--wait", "--timeout=60s", check=False)
        kubectl("delete", "namespace", apps, "--wait=false", check=False)


def _dashboard_queries(namespace: str, app: str) -> list[str]:
    board = json.loads((CHART / "files" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for panel in board["panels"] for t in panel.get("targets", [])]
    picked = {"$namespace": namespace, "$app": app, "$__rate_interval": "1m"}
    return [re.sub(r"\$\w+", lambda m: picked[m.group(0)], expr) for expr in exprs]


def _finished_job(namespace: str, image: str, toleration: dict[str, Any]) -> dict[str, Any]:
    """A Job labelled as the app's compaction Job that completes at once."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "compaction-done",
            "namespace": namespace,
            "labels": {
                COMPONENT_LABEL: COMPONENT,
                "app.kubernetes.io/managed-by": "baton-operator",
                LABEL_APP: APP,
            },
        },
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "tolerations": [toleration],
                    "containers": [
                        {"name": "done", "image": image, "imagePullPolicy": "Never", "command": ["true"]}
                    ],
                }
            },
        },
    }
