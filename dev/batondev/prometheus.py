"""A Prometheus server for the tests, configured from the chart's own monitors.

The chart declares how Prometheus scrapes Baton as prometheus-operator objects: a
ServiceMonitor for the operator, a PodMonitor for every StreamApp's workers, a PrometheusRule
with the alerts. The stack has no prometheus-operator, so ``scrape_configs`` turns those
objects into the scrape jobs the operator would generate (Kubernetes service discovery
against the stack's apiserver, the selector and port kept by relabelling, the target labels
it adds, the endpoint's own relabelling, ``honor_labels``) and ``rule_groups`` the rules. What
the chart gets wrong here (a selector that keeps nothing, a label renamed
``exported_namespace``) is wrong in a cluster too.

The server is built from its Go module (``gobuild.build_prometheus``), without the web UI's
assets: the tests use its HTTP API.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import requests
import yaml

from batondev import gobuild, ports

# prometheus-operator's camelCase relabelling fields -> Prometheus' snake_case ones
_RELABEL_FIELDS = {
    "sourceLabels": "source_labels",
    "targetLabel": "target_label",
    "separator": "separator",
    "regex": "regex",
    "replacement": "replacement",
    "action": "action",
    "modulus": "modulus",
}


def _label_name(label: str) -> str:
    """A Kubernetes label as service discovery names its meta label (``baton.dev/app`` -> ``baton_dev_app``)."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", label)


def _selector_keep(kind: str, match_labels: dict[str, str]) -> list[dict[str, Any]]:
    return [
        {
            "action": "keep",
            "source_labels": [
                f"__meta_kubernetes_{kind}_label_{_label_name(k)}",
                f"__meta_kubernetes_{kind}_labelpresent_{_label_name(k)}",
            ],
            "regex": f"({re.escape(v)});true",
        }
        for k, v in sorted(match_labels.items())
    ]


def _namespaces(monitor: dict[str, Any]) -> dict[str, Any]:
    selector = monitor["spec"].get("namespaceSelector") or {}
    if selector.get("any"):
        return {}
    names = selector.get("matchNames") or [monitor["metadata"]["namespace"]]
    return {"namespaces": {"names": list(names)}}


def _relabelings(endpoint: dict[str, Any], key: str) -> list[dict[str, Any]]:
    return [{_RELABEL_FIELDS[k]: v for k, v in r.items()} for r in endpoint.get(key) or []]


def _job(
    name: str, sd: dict[str, Any], relabel: list[dict[str, Any]], endpoint: dict[str, Any]
) -> dict[str, Any]:
    """One scrape job: discovery, the monitor's relabelling after the operator's, the endpoint's settings."""
    out: dict[str, Any] = {
        "job_name": name,
        "kubernetes_sd_configs": [sd],
        "relabel_configs": relabel + _relabelings(endpoint, "relabelings"),
        "honor_labels": bool(endpoint.get("honorLabels", False)),
        "metrics_path": endpoint.get("path", "/metrics"),
        "scheme": endpoint.get("scheme", "http"),
    }
    if endpoint.get("interval"):
        out["scrape_interval"] = endpoint["interval"]
    if endpoint.get("metricRelabelings"):
        out["metric_relabel_configs"] = _relabelings(endpoint, "metricRelabelings")
    return out


def _service_monitor(monitor: dict[str, Any], kubeconfig: Path) -> Iterator[dict[str, Any]]:
    meta, spec = monitor["metadata"], monitor["spec"]
    for i, endpoint in enumerate(spec["endpoints"]):
        sd = {"role": "endpointslice", "kubeconfig_file": str(kubeconfig), **_namespaces(monitor)}
        relabel = _selector_keep("service", spec["selector"].get("matchLabels") or {})
        relabel += [
            {
                "action": "keep",
                "source_labels": ["__meta_kubernetes_endpointslice_port_name"],
                "regex": endpoint["port"],
            },
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "service"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"source_labels": ["__meta_kubernetes_service_name"], "target_label": "job"},
            {"target_label": "endpoint", "replacement": endpoint["port"]},
        ]
        yield _job(f"serviceMonitor/{meta['namespace']}/{meta['name']}/{i}", sd, relabel, endpoint)


def _pod_monitor(monitor: dict[str, Any], kubeconfig: Path) -> Iterator[dict[str, Any]]:
    meta, spec = monitor["metadata"], monitor["spec"]
    for i, endpoint in enumerate(spec["podMetricsEndpoints"]):
        sd = {"role": "pod", "kubeconfig_file": str(kubeconfig), **_namespaces(monitor)}
        relabel = _selector_keep("pod", spec["selector"].get("matchLabels") or {})
        relabel += [
            {
                "action": "keep",
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "regex": endpoint["port"],
            },
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_container_name"], "target_label": "container"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {"target_label": "job", "replacement": f"{meta['namespace']}/{meta['name']}"},
            {"target_label": "endpoint", "replacement": endpoint["port"]},
        ]
        yield _job(f"podMonitor/{meta['namespace']}/{meta['name']}/{i}", sd, relabel, endpoint)


def scrape_configs(objects: Iterable[dict[str, Any]], kubeconfig: Path) -> list[dict[str, Any]]:
    """The scrape jobs prometheus-operator generates for these ServiceMonitors and PodMonitors."""
    out: list[dict[str, Any]] = []
    for obj in objects:
        if obj.get("kind") == "ServiceMonitor":
            out += _service_monitor(obj, kubeconfig)
        elif obj.get("kind") == "PodMonitor":
            out += _pod_monitor(obj, kubeconfig)
    return out


def rule_groups(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rule groups of the PrometheusRules among ``objects`` (a rule file's ``groups``)."""
    return [g for obj in objects if obj.get("kind") == "PrometheusRule" for g in obj["spec"]["groups"]]


class Prometheus:
    """A running server: its HTTP API at ``url``."""

    def __init__(self, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.url = url
        self.proc = proc
        self.log = log

    def _get(self, path: str, **params: str) -> Any:
        resp = requests.get(f"{self.url}{path}", params=params, timeout=30)
        body = resp.json()
        if body.get("status") != "success":
            raise RuntimeError(f"prometheus {path} {params}: {body.get('error') or resp.text}")
        return body["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query's vector: each element's ``metric`` (labels) and ``value``."""
        data = self._get("/api/v1/query", query=expr)
        if data["resultType"] != "vector":
            raise RuntimeError(f"{expr}: a {data['resultType']}, not a vector")
        result: list[dict[str, Any]] = data["result"]
        return result

    def targets(self) -> list[dict[str, Any]]:
        active: list[dict[str, Any]] = self._get("/api/v1/targets")["activeTargets"]
        return active

    def rules(self) -> list[dict[str, Any]]:
        return [r for g in self._get("/api/v1/rules")["groups"] for r in g["rules"]]


@contextmanager
def server(workdir: Path, scrape: list[dict[str, Any]], rules: list[dict[str, Any]]) -> Iterator[Prometheus]:
    """Prometheus with these scrape jobs and rule groups, evaluating every 2 s, stopped on exit."""
    binary = gobuild.build_prometheus() / "prometheus"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "rules.yaml").write_text(yaml.safe_dump({"groups": rules}))
    config = {
        "global": {"scrape_interval": "5s", "evaluation_interval": "2s"},
        "rule_files": [str(workdir / "rules.yaml")],
        "scrape_configs": scrape,
    }
    (workdir / "prometheus.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    port = ports.PROMETHEUS
    log = workdir / "prometheus.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [
                str(binary),
                f"--config.file={workdir / 'prometheus.yaml'}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    prom = Prometheus(f"http://127.0.0.1:{port}", proc, log)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prometheus exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if requests.get(f"{prom.url}/-/ready", timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prometheus not ready in 60 s:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield prom
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
