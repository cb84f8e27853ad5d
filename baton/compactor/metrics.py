"""The audit as Prometheus metrics, in the text format (pure).

The job is a batch: it writes ``metrics.prom`` next to the report, for a node-exporter
textfile collector or a push to a Pushgateway, since nothing would be
left to scrape once the CronJob's Pod exits.
"""

from __future__ import annotations

from typing import Any


def prometheus_text(report: dict[str, Any], application_id: str) -> str:
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
        lines.append(f"# HELP {name} {help_text}")
        lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            text = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
            lines.append(f"{name}{{{text}}} {value}")

    parts = [p for p in report["partitions"] if p["application_id"] == application_id]

    def per_partition(field: str) -> list[tuple[dict[str, str], float]]:
        return [
            (
                {"application_id": application_id, "store": p["store"], "partition": str(p["partition"])},
                float(p["stats"][field]),
            )
            for p in parts
        ]

    metric(
        "baton_compaction_records_read",
        "gauge",
        "Changelog records read by the last compaction run.",
        per_partition("records"),
    )
    metric(
        "baton_compaction_live_keys", "gauge", "Live keys in the last snapshot.", per_partition("live_keys")
    )
    metric(
        "baton_compaction_lag_records",
        "gauge",
        "Changelog records a restore reads beyond the live keys (compaction lag).",
        per_partition("compaction_lag"),
    )
    metric("baton_compaction_tombstones", "gauge", "Tombstones read.", per_partition("tombstones"))
    metric("baton_compaction_bytes", "gauge", "Key and value bytes read.", per_partition("bytes"))
    kinds: dict[str, int] = {}
    for finding in report["findings"]:
        kinds[finding["kind"]] = kinds.get(finding["kind"], 0) + 1
    metric(
        "baton_audit_findings",
        "gauge",
        "Audit findings of the last run, by kind.",
        [({"application_id": application_id, "kind": k}, float(n)) for k, n in sorted(kinds.items())],
    )
    metric(
        "baton_compaction_last_run_seconds",
        "gauge",
        "Duration of the last compaction run.",
        [({"application_id": application_id}, float(report["seconds"]))],
    )
    return "\n".join(lines) + "\n"
