"""One compaction run: snapshot every changelog partition of the given application ids, then audit.

Steps, in order:

1. Take, per changelog partition, [first offset, last stable offset) at start; the group's
   committed input positions before and after (the audit compares stores only when the
   app did not move in between).
2. Plan each partition (``incremental.py``): from the newest snapshot that is still a safe
   base, read the changelog after it; without one, read the changelog whole; a partition
   whose changelog has not grown since its newest snapshot is left alone.
3. Read those ranges with Spark's Kafka source, merge them with the base snapshots and
   keep the latest value per key.
4. Write a snapshot per partition that has changed since the newest one; keep the last N
   complete ones, remove unfinished and unusable ones (``retention.py``).
5. Audit: changelog configs, per-partition statistics, blue versus green, stores versus a
   recomputation from the input (both read the snapshots of unchanged partitions); write
   the report (JSON and Prometheus text) to the store, keep the last reports.

Why one module of this size: the steps above share one Spark session and one run's
report; each step is a function here, the pure logic lives in ``incremental.py``,
``audit.py``, ``frames.py`` and ``recompute.py``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from baton.compactor import frames, incremental, recompute, retention
from baton.compactor.audit import MAX_REASONS, Divergence, Finding, config_findings, not_compared, show
from baton.compactor.incremental import Candidate, Plan
from baton.compactor.java_kafka import spark_kafka_options
from baton.compactor.kafka import Changelog, KafkaView
from baton.compactor.latest import PartitionStats
from baton.compactor.store import HadoopStore
from baton.worker.state.snapshot import CHECKED, MANIFEST, end_of, partition_dir, snapshot_name

FORMAT = 2  # 2: the manifest names the changelog's topic id

log = logging.getLogger(__name__)

REPORT_DIR = "_audit"
RECOMPUTE_DIR = "_recompute"  # the recomputation audit's baselines, per sub-topology
STAGING_DIR = "_staging"


@dataclass
class JobConfig:
    bootstrap: str
    application_ids: list[str]
    snapshot_store: str
    keep: int = 3
    topology: str | None = None  # enables the recomputation audit
    kafka_config: dict[str, str] = field(default_factory=dict)  # librdkafka and Spark's kafka.* settings


@dataclass
class PartitionResult:
    application_id: str
    store: str
    topic: str
    partition: int
    start_offset: int
    end_offset: int
    stats: PartitionStats
    snapshot: str | None  # path of the snapshot covering end_offset (new or existing)
    written: bool
    read_from: int  # the changelog offset this run read from: start_offset, or its base's end
    base: str | None  # the earlier snapshot merged in (an incremental run)
    plan: str  # "incremental", "unchanged", or why the changelog was read whole
    deleted: list[int] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["stats"]["compaction_lag"] = self.stats.compaction_lag
        return out


def run(spark: Any, config: JobConfig) -> dict[str, Any]:
    started = time.monotonic()
    created = datetime.now(UTC).isoformat(timespec="seconds")
    view = KafkaView(config.bootstrap, config.kafka_config)
    store = HadoopStore(spark, config.snapshot_store)
    changelogs = [c for app in config.application_ids for c in view.changelogs(app)]
    before = {app: view.committed(app) for app in config.application_ids}
    ranges = {c.topic: view.offsets(c.topic, c.partitions) for c in changelogs}
    topic_ids = view.topic_ids([c.topic for c in changelogs])
    configs = {c.topic: view.configs(c.topic) for c in changelogs}
    findings: list[Finding] = [f for c in changelogs for f in config_findings(c.topic, configs[c.topic])]
    spark_kafka = spark_options(config)
    listed = {
        (c.topic, p): _listing(store, partition_dir(store.root, c.application_id, c.store, p))
        for c in changelogs
        for p in ranges[c.topic]
    }
    found = {k: complete for k, (complete, _unfinished) in listed.items()}
    plans = _plans(changelogs, ranges, configs, topic_ids, found)
    _remove_unusable(store, listed, plans)

    timings = {"kafka_metadata": time.monotonic() - started}
    mark = time.monotonic()
    unread = {
        topic: {
            p: (plans[(topic, p)].read_from, high)
            for p, (_low, high) in parts.items()
            if not plans[(topic, p)].unchanged
        }
        for topic, parts in ranges.items()
    }
    bases = {k: plan.base.path for k, plan in plans.items() if plan.base is not None and not plan.unchanged}
    unchanged = {k: plan.base for k, plan in plans.items() if plan.base is not None and plan.unchanged}
    records = frames.union(
        frames.read_kafka(spark, config.bootstrap, unread, spark_kafka), frames.read_snapshots(spark, bases)
    )
    keys = frames.per_key(records).cache() if records is not None else None
    stats = frames.stats(keys) if keys is not None else {}
    for key, base in unchanged.items():  # nothing read: what the snapshot holds
        stats[key] = PartitionStats(distinct_keys=base.records, live_keys=base.records, live_read=0)
    timings["read_and_aggregate"] = time.monotonic() - mark
    mark = time.monotonic()
    results = _snapshots(
        spark,
        store,
        config,
        changelogs=changelogs,
        ranges=ranges,
        plans=plans,
        found=found,
        stats=stats,
        keys=keys,
        created=created,
        topic_ids=topic_ids,
    )

    timings["write_snapshots"] = time.monotonic() - mark
    mark = time.monotonic()
    after = {app: view.committed(app) for app in config.application_ids}
    stable = {app: before[app] == after[app] for app in config.application_ids}
    live = frames.union(
        frames.live(keys) if keys is not None else None,
        frames.snapshot_rows(spark, {k: base.path for k, base in unchanged.items()}),
    )
    audits: dict[str, Any] = {}
    if config.topology and live is not None:
        audits["recompute"] = _recompute_audit(
            spark,
            config,
            changelogs=changelogs,
            committed=before,
            lows=_input_lows(view, before),
            stable=stable,
            live=live,
            findings=findings,
            store=store,
            view=view,
        )
    if live is not None:
        audits["colors"] = _color_audit(
            config, changelogs=changelogs, committed=before, stable=stable, live=live, findings=findings
        )
    if keys is not None:
        keys.unpersist()
    timings["audit"] = time.monotonic() - mark
    log.info("compaction done", extra={k: round(v, 2) for k, v in timings.items()})

    report = {
        "created_at": created,
        "application_ids": config.application_ids,
        "snapshot_store": config.snapshot_store,
        "seconds": round(time.monotonic() - started, 3),
        "records_read": sum(r.stats.records for r in results),
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "partitions": [r.to_json() for r in results],
        "findings": [f.to_json() for f in findings],
        "audits": audits,
        "summary": _summary(results, findings, audits),
    }
    _write_report(store, config, report)
    return report


def _listing(store: HadoopStore, folder: str) -> tuple[list[Candidate], list[str]]:
    """One partition's folder: its complete snapshots (what their manifests say), and unfinished ones."""
    out, unfinished = [], []
    for name in store.children(folder):
        end, path = end_of(name), f"{folder}/{name}"
        if end is None:
            continue
        if not store.exists(f"{path}/{MANIFEST}"):
            unfinished.append(path)
            continue
        manifest = store.read_json(f"{path}/{MANIFEST}")
        checked = store.read_json(f"{path}/{CHECKED}") if store.exists(f"{path}/{CHECKED}") else {}
        out.append(
            Candidate(
                end,
                path,
                manifest.get("created_at"),
                checked.get("checked_at"),
                manifest.get("topic_id") or None,
                int(manifest.get("records", 0)),
            )
        )
    return out, unfinished


def _remove_unusable(
    store: HadoopStore,
    listed: dict[tuple[str, int], tuple[list[Candidate], list[str]]],
    plans: dict[tuple[str, int], Plan],
) -> None:
    """Delete what a crashed run left half-written and snapshots no run or worker may use again.

    CronJobs of one app never overlap (``concurrencyPolicy: Forbid``), so a snapshot folder
    without a manifest is a crashed run's. A snapshot refused for another reason than the
    tombstone horizon (another incarnation of the changelog, no topic id, below its start)
    stays refused forever. Both would also block a new snapshot at the same end offset.
    """
    for key, (complete, unfinished) in listed.items():
        plan = plans[key]
        unusable = [c.path for c in complete if c.path in plan.refused]
        for path in unfinished + unusable:
            log.info("removing snapshot", extra={"path": path, "why": plan.refused.get(path, "unfinished")})
            store.delete(path)


def _plans(
    changelogs: list[Changelog],
    ranges: dict[str, dict[int, tuple[int, int]]],
    configs: dict[str, dict[str, str]],
    topic_ids: dict[str, str],
    found: dict[tuple[str, int], list[Candidate]],
) -> dict[tuple[str, int], Plan]:
    now = time.time()
    plans = {}
    for c in changelogs:
        delete_retention_ms = incremental.retention_ms(configs[c.topic])
        for partition, (low, high) in ranges[c.topic].items():
            plan = incremental.plan(
                found[(c.topic, partition)],
                topic_id=topic_ids.get(c.topic),
                low=low,
                high=high,
                delete_retention_ms=delete_retention_ms,
                now=now,
            )
            plans[(c.topic, partition)] = plan
            log.info(
                "compaction plan",
                extra={
                    "application_id": c.application_id,
                    "store": c.store,
                    "partition": partition,
                    "read_from": plan.read_from,
                    "end_offset": high,
                    "plan": plan.reason,
                },
            )
    return plans


def _snapshots(
    spark: Any,
    store: HadoopStore,
    config: JobConfig,
    *,
    changelogs: list[Changelog],
    ranges: dict[str, dict[int, tuple[int, int]]],
    plans: dict[tuple[str, int], Plan],
    found: dict[tuple[str, int], list[Candidate]],
    stats: dict[tuple[str, int], PartitionStats],
    keys: Any,
    created: str,
    topic_ids: dict[str, str],
) -> list[PartitionResult]:
    """Write the snapshots that are new, apply retention; one result per changelog partition."""
    results: list[PartitionResult] = []
    stale: list[tuple[str, int]] = []
    for c in changelogs:
        for partition, (low, high) in sorted(ranges[c.topic].items()):
            base = partition_dir(store.root, c.application_id, c.store, partition)
            plan = plans[(c.topic, partition)]
            existing = _kept_ends(found[(c.topic, partition)], plan)
            path = f"{base}/{snapshot_name(high)}"
            result = PartitionResult(
                c.application_id,
                c.store,
                c.topic,
                partition,
                low,
                high,
                stats.get((c.topic, partition), PartitionStats()),
                path,
                written=high not in existing,
                read_from=plan.read_from,
                base=plan.base.path if plan.base is not None else None,
                plan=plan.reason,
            )
            results.append(result)
            if result.written:
                stale.append((c.topic, partition))
    now = datetime.now(UTC)
    for name in retention.stale_staging(store.children(f"{store.root}/{STAGING_DIR}"), now):
        log.info("removing a crashed run's staging folder", extra={"path": f"{STAGING_DIR}/{name}"})
        store.delete(f"{store.root}/{STAGING_DIR}/{name}")
    staging = f"{store.root}/{STAGING_DIR}/{retention.staging_name(now, uuid.uuid4().hex)}"
    if stale and keys is not None:
        from pyspark.sql import functions as F  # noqa: N812

        wanted = spark.createDataFrame(stale, "topic string, partition int")
        content = frames.live(keys).join(F.broadcast(wanted), ["topic", "partition"])
        content.repartition("topic", "partition").write.partitionBy("topic", "partition").parquet(staging)
    for r in results:
        if not r.written and r.snapshot is not None:
            # the end has not moved since that snapshot: records after it are younger than this run
            store.write_text(f"{r.snapshot}/{CHECKED}", json.dumps({"checked_at": created}))
        if r.written:
            assert r.snapshot is not None
            source = f"{staging}/topic={r.topic}/partition={r.partition}"
            if store.exists(source):
                store.move(source, r.snapshot)
            else:  # no live key: an empty snapshot still says "nothing below end_offset"
                store.mkdirs(r.snapshot)
            store.write_text(
                f"{r.snapshot}/{MANIFEST}",
                json.dumps(
                    {
                        "format": FORMAT,
                        "application_id": r.application_id,
                        "store": r.store,
                        "topic": r.topic,
                        "topic_id": topic_ids[r.topic],
                        "partition": r.partition,
                        "start_offset": r.start_offset,
                        "end_offset": r.end_offset,
                        "read_from": r.read_from,
                        "base": r.base,
                        "records": r.stats.live_keys,
                        "changelog_records": r.stats.records,
                        "created_at": created,
                    }
                ),
            )
        base = partition_dir(store.root, r.application_id, r.store, r.partition)
        plan = plans[(r.topic, r.partition)]
        ends = _kept_ends(found[(r.topic, r.partition)], plan)
        r.deleted = retention.to_delete(ends | {r.end_offset}, config.keep)
        for end in r.deleted:
            store.delete(f"{base}/{snapshot_name(end)}")
    store.delete(staging)
    return results


def _input_lows(
    view: KafkaView, committed: dict[str, dict[tuple[str, int], int]]
) -> dict[tuple[str, int], int]:
    """The first offset of every input partition an app has committed a position on."""
    counts: dict[str, int] = {}
    for positions in committed.values():
        for topic, partition in positions:
            counts[topic] = max(counts.get(topic, 0), partition + 1)
    return {
        (topic, partition): low
        for topic, n in counts.items()
        for partition, (low, _high) in view.offsets(topic, n).items()
    }


def _kept_ends(found: list[Candidate], plan: Plan) -> set[int]:
    """End offsets of a partition's complete snapshots that stay: all but those the plan refused for good."""
    return {s.end_offset for s in found if s.path not in plan.refused}


def _recompute_audit(
    spark: Any,
    config: JobConfig,
    *,
    changelogs: list[Changelog],
    committed: dict[str, dict[tuple[str, int], int]],
    lows: dict[tuple[str, int], int],
    stable: dict[str, bool],
    live: Any,
    findings: list[Finding],
    store: HadoopStore,
    view: KafkaView,
) -> dict[str, Any]:
    from baton.worker.topology.loader import load

    assert config.topology is not None
    try:
        topology = load(config.topology)
    except ImportError as exc:  # the compactor image need not carry the app's code: say so, go on
        log.warning("topology not importable: no recomputation audit", extra={"error": str(exc)})
        return {
            "skipped": [
                f"the topology {config.topology} is not importable in the compactor's image ({exc}); "
                "set spec.compaction.image to an image built FROM the compactor image with the app's code"
            ],
            "apps": {},
        }
    plans, skipped = recompute.plans(topology)
    out: dict[str, Any] = {"skipped": skipped, "apps": {}}
    for app in config.application_ids:
        if not stable[app]:
            out["apps"][app] = {
                "compared": False,
                "reason": "the app committed new input positions during the run",
            }
            continue
        positions = committed[app]
        app_topics = {c.topic for c in changelogs if c.application_id == app}
        results = {}
        for plan in plans:
            topics = [f"{app}-{s}-changelog" for s in plan.stores if f"{app}-{s}-changelog" in app_topics]
            if not topics:
                continue
            folder = f"{store.root}/{app}/{RECOMPUTE_DIR}/{plan.subtopology}"
            baseline = _baseline(store, folder)
            ids = view.input_topic_ids(sorted({t for t, _p in positions if t in plan.topics}))
            replay = recompute.replay_ranges(plan, positions, lows, ids, baseline)
            if replay.why_not_baseline:
                log.info(
                    "recomputing from the input's start",
                    extra={"app": app, "reason": replay.why_not_baseline},
                )
            if replay.gap:  # not a divergence: the input that would show one way or the other is gone
                out["skipped"].append(f"{app}: {replay.gap}")
                continue
            inputs = frames.read_kafka(spark, config.bootstrap, replay.ranges, spark_options(config))
            seeds = (
                spark.read.schema(BASELINE_SCHEMA).parquet(f"{folder}/{replay.baseline.state}")
                if replay.baseline is not None
                else None
            )
            if inputs is None and seeds is None:
                continue
            expected = _keep_baseline(
                spark,
                store,
                folder,
                recompute.recompute(
                    spark, inputs, seeds, target=config.topology, application_id=app, plan=plan
                ),
                recompute.Baseline("", {k: o for k, o in positions.items() if k[0] in plan.topics}, ids),
            )
            actual = live.where(live.topic.isin(topics))
            counts, samples = frames.diff(expected, actual)
            results[str(plan.subtopology)] = {
                **counts,
                "replayed_from": "last audit" if replay.baseline is not None else "start",
                "input_offsets": replay.offsets,
            }
            if counts["compared"] and counts["missing"] + counts["unexpected"] + counts["different"]:
                findings.append(
                    _divergence(
                        "divergence-recompute",
                        ",".join(topics),
                        counts,
                        samples,
                        f"{app}: the stores differ from a recomputation of the topology "
                        "from the input at the committed input position",
                    )
                )
        out["apps"][app] = {"compared": True, "subtopologies": results}
    return out


BASELINE_SCHEMA = "topic string, partition int, key binary, value binary"


def _baseline(store: HadoopStore, folder: str) -> recompute.Baseline | None:
    """The last audit's recomputation of a sub-topology, when it is there whole."""
    if not store.exists(f"{folder}/{MANIFEST}"):
        return None
    baseline = recompute.Baseline.from_json(store.read_json(f"{folder}/{MANIFEST}"))
    if baseline is None or not store.exists(f"{folder}/{baseline.state}"):
        return None
    return baseline


def _keep_baseline(
    spark: Any, store: HadoopStore, folder: str, rows: Any, baseline: recompute.Baseline
) -> Any:
    """Write a recomputation as the next run's baseline; its store rows, read back.

    The rows are written to a new folder first and the manifest naming it is written after
    (one object, replaced whole), so a run that dies half-way leaves the previous baseline
    in force; older folders go once the new manifest stands. Reading the written rows back
    computes the recomputation once, not once for the baseline and once for the diff."""
    state = f"state-{uuid.uuid4().hex[:12]}"
    rows.write.parquet(f"{folder}/{state}")
    store.write_text(
        f"{folder}/{MANIFEST}",
        json.dumps(recompute.Baseline(state, baseline.positions, baseline.topic_ids).to_json()),
    )
    for name in store.children(folder):
        if name not in {MANIFEST, state}:
            store.delete(f"{folder}/{name}")
    written = spark.read.schema(BASELINE_SCHEMA).parquet(f"{folder}/{state}")
    return written.where(written.topic != recompute.STREAM_TIME)


def _color_audit(
    config: JobConfig,
    *,
    changelogs: list[Changelog],
    committed: dict[str, dict[tuple[str, int], int]],
    stable: dict[str, bool],
    live: Any,
    findings: list[Finding],
) -> dict[str, Any]:
    """Blue against green, store by store, when both colors stand at the same input position."""
    from pyspark.sql import functions as F  # noqa: N812

    out: dict[str, Any] = {}
    for blue in config.application_ids:
        if not blue.endswith("-blue"):
            continue
        base = blue.removesuffix("-blue")
        green = base + "-green"
        if green not in config.application_ids:
            continue
        external = {k: v for k, v in committed[blue].items() if not k[0].startswith(f"{blue}-")}
        external_g = {k: v for k, v in committed[green].items() if not k[0].startswith(f"{green}-")}
        if not (stable[blue] and stable[green]) or external != external_g:
            out[base] = {"compared": False, "reason": "the colors are not at the same input position"}
            continue
        stores = sorted(
            {c.store for c in changelogs if c.application_id == blue}
            & {c.store for c in changelogs if c.application_id == green}
        )
        result = {}
        for s in stores:

            def side(app: str, name: str = s) -> Any:
                return live.where(live.topic == f"{app}-{name}-changelog").withColumn("topic", F.lit(name))

            counts, samples = frames.diff(side(blue), side(green))
            result[s] = counts
            if counts["missing"] + counts["unexpected"] + counts["different"]:
                findings.append(
                    _divergence(
                        "divergence-colors",
                        s,
                        counts,
                        samples,
                        f"{base}: blue and green stores {s!r} differ at the same input position",
                    )
                )
        out[base] = {"compared": True, "stores": result}
    return out


def _divergence(kind: str, topic: str, counts: dict[str, int], samples: list[Any], message: str) -> Finding:
    divergence = Divergence(compared=counts["compared"])
    for row in samples:
        divergence.add(bytes(row["key"]), _bytes(row["expected"]), _bytes(row["actual"]))
    divergence.missing, divergence.unexpected, divergence.different = (
        counts["missing"],
        counts["unexpected"],
        counts["different"],
    )
    return Finding(kind, topic, message, details=divergence.to_json())


def _bytes(raw: Any) -> bytes | None:
    return None if raw is None else bytes(raw)


def _summary(
    results: list[PartitionResult], findings: list[Finding], audits: dict[str, Any]
) -> dict[str, Any]:
    """The short form for the StreamApp status and metrics."""
    records = sum(r.stats.records for r in results)
    live = sum(r.stats.live_keys for r in results)
    unchecked = not_compared(audits)
    return {
        "partitions": len(results),
        "snapshots_written": sum(r.written for r in results),
        "records_read": records,
        "live_keys": live,
        "tombstones": sum(r.stats.tombstones for r in results),
        "bytes": sum(r.stats.bytes for r in results),
        "compaction_lag": sum(r.stats.compaction_lag for r in results),
        "findings": len(findings),
        "finding_kinds": sorted({f.kind for f in findings}),
        "not_compared": len(unchecked),
        "not_compared_reasons": unchecked[:MAX_REASONS],
    }


def _write_report(store: HadoopStore, config: JobConfig, report: dict[str, Any]) -> None:
    from baton.compactor.metrics import prometheus_text

    body = json.dumps(report, indent=2, default=show)
    stamp = report["created_at"].replace(":", "").replace("-", "")
    for app in config.application_ids:
        folder = f"{store.root}/{app}/{REPORT_DIR}"
        store.write_text(f"{folder}/report-{stamp}.json", body)
        store.write_text(f"{folder}/latest.json", body)
        store.write_text(f"{folder}/metrics.prom", prometheus_text(report, app))
        for name in retention.old_reports(store.children(folder)):
            store.delete(f"{folder}/{name}")


def spark_options(config: JobConfig) -> dict[str, str]:
    """Spark's Kafka source options: the one set of settings in Java's names, and consumer
    groups under the app's prefix, which its principal may describe (docs/security.md)."""
    prefix = config.application_ids[0] if config.application_ids else "baton"
    return {**spark_kafka_options(config.kafka_config), "groupIdPrefix": f"{prefix}-compact"}
