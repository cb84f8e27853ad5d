"""Pure parts of the compactor: latest-per-key, retention, audit rules, metrics, CronJob, snapshot layout."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from baton import __version__
from baton.compactor import incremental, retention
from baton.compactor.audit import MAX_SEGMENT_BYTES, compare, config_findings, not_compared, show
from baton.compactor.incremental import Candidate, Plan
from baton.compactor.kafka import store_of
from baton.compactor.latest import PartitionStats, latest_per_key
from baton.compactor.metrics import prometheus_text
from baton.compactor.recompute import plans
from baton.compactor.retention import to_delete
from baton.compactor.s3a import CLASSPATH_ENV, hadoop_settings
from baton.compactor.session import settings
from baton.compactor.status import compaction_status, parse_streamapp
from baton.operator.core.compaction.cronjob import DEFAULT_IMAGE, SNAPSHOT_MOUNT, compactor_identity, cronjob
from baton.worker.state import snapshot
from baton.worker.state.snapshot_fs import open_store
from baton.worker.state.snapshot_uri import S3Settings
from baton.worker.state.stores import MemoryStore
from baton.worker.topology.dsl import Topology
from tests.support.compaction import streamapp

pytestmark = pytest.mark.unit


def test_latest_per_key_highest_offset_wins_and_tombstones_delete() -> None:
    records = [
        (3, b"a", b"3"),
        (0, b"a", b"1"),
        (1, b"b", b"x"),
        (2, b"b", None),
        (4, None, b"ignored"),
        (5, b"c", None),
        (6, b"d", b"dd"),
    ]
    live, stats = latest_per_key(records)
    assert live == {b"a": b"3", b"d": b"dd"}
    assert (stats.records, stats.tombstones, stats.distinct_keys, stats.live_keys) == (6, 2, 4, 2)
    assert stats.bytes == 2 + 2 + 2 + 1 + 1 + 3
    assert stats.compaction_lag == 4


def test_a_key_deleted_then_written_again_is_live() -> None:
    live, _ = latest_per_key([(0, b"k", b"1"), (1, b"k", None), (2, b"k", b"2")])
    assert live == {b"k": b"2"}


def test_crashed_staging_and_old_reports_are_pruned() -> None:
    now = datetime.fromisoformat("2026-11-28T12:00:00+00:00")
    mine = retention.staging_name(now, "abc123")
    assert mine == "20261128T120000Z-abc123"
    names = [mine, "20261127T110000Z-aa", "20261127T130000Z-bb", "0123456789abcdef", "notes.txt"]
    # older than a day, or an older release's bare uuid: a crashed run's; anything younger may be running
    assert retention.stale_staging(names, now) == ["0123456789abcdef", "20261127T110000Z-aa", "notes.txt"]
    reports = [f"report-202611{d:02d}T000000+0000.json" for d in range(1, 16)]
    kept = set(reports) - set(retention.old_reports([*reports, "latest.json", "metrics.prom"], keep=10))
    assert kept == set(reports[5:])


def test_retention_keeps_the_newest_n() -> None:
    assert to_delete([10, 30, 20, 40], 2) == [10, 20]
    assert to_delete([10], 3) == []
    with pytest.raises(ValueError):
        to_delete([1], 0)


def test_config_findings() -> None:
    good = {"cleanup.policy": "compact", "segment.bytes": str(16 << 20), "segment.ms": "600000"}
    assert config_findings("t", good) == []
    assert [f.kind for f in config_findings("t", {**good, "cleanup.policy": "delete"})] == ["cleanup-policy"]
    assert [f.kind for f in config_findings("t", {**good, "cleanup.policy": "compact,delete"})] == [
        "cleanup-policy"
    ]
    assert [f.kind for f in config_findings("t", {})] == ["cleanup-policy"]  # Kafka's default is delete
    big = {**good, "segment.bytes": str(MAX_SEGMENT_BYTES + 1), "segment.ms": str(7 * 86400000)}
    assert [f.kind for f in config_findings("t", big)] == ["segment-bytes", "segment-ms"]


def test_compare_counts_each_kind_of_divergence() -> None:
    result = compare({b"a": b"1", b"b": b"2", b"c": b"3"}, {b"a": b"1", b"b": b"9", b"d": b"4"})
    assert (result.compared, result.missing, result.unexpected, result.different) == (4, 1, 1, 1)
    assert result.samples == [
        {"key": "b", "expected": "2", "actual": "9"},
        {"key": "c", "expected": "3", "actual": None},
        {"key": "d", "expected": None, "actual": "4"},
    ]
    assert compare({b"a": b"1"}, {b"a": b"1"}).total == 0
    assert show(b"\xff\x00") == "0xff00"


def test_store_of_changelog_names() -> None:
    assert store_of("app", "app-counts-changelog") == "counts"
    assert store_of("app", "app-changelog") is None
    assert store_of("app", "other-counts-changelog") is None
    assert store_of("app", "app-counts-repartition") is None
    # colors and Rebuild generations are application ids of their own, not stores of this one
    assert store_of("app-blue", "app-blue-g2-counts-changelog") is None
    assert store_of("app-blue-g2", "app-blue-g2-counts-changelog") == "counts"
    assert store_of("app", "app-green-counts-changelog") is None


def test_prometheus_text() -> None:
    report = {
        "seconds": 1.5,
        "findings": [{"kind": "cleanup-policy"}, {"kind": "cleanup-policy"}],
        "partitions": [
            {
                "application_id": "a",
                "store": "s",
                "partition": 0,
                "stats": {"records": 10, "live_keys": 2, "compaction_lag": 8, "tombstones": 1, "bytes": 99},
            },
            {
                "application_id": "other",
                "store": "s",
                "partition": 0,
                "stats": {"records": 1, "live_keys": 1, "compaction_lag": 0, "tombstones": 0, "bytes": 1},
            },
        ],
    }
    text = prometheus_text(report, "a")
    assert 'baton_compaction_lag_records{application_id="a",partition="0",store="s"} 8.0' in text
    assert 'baton_audit_findings{application_id="a",kind="cleanup-policy"} 2.0' in text
    assert "other" not in text


def _app(**compaction: object) -> dict[str, Any]:
    return streamapp(compaction)


def test_cronjob_disabled_is_none_and_needs_a_store() -> None:
    assert cronjob(_app()) is None
    with pytest.raises(ValueError, match="snapshotStore"):
        cronjob(_app(enabled=True))


def test_cronjob_compacts_both_colors_forbids_overlap_and_suspends_during_a_flip() -> None:
    job = cronjob(
        _app(enabled=True, schedule="*/5 * * * *", snapshotStore="s3a://b/snap", keep=2),
        extra_env=[{"name": "X", "value": "1"}],
    )
    assert job is not None
    spec = job["spec"]
    assert (spec["schedule"], spec["concurrencyPolicy"], spec["suspend"]) == ("*/5 * * * *", "Forbid", False)
    assert job["metadata"]["name"] == "clicks-compactor"
    assert job["metadata"]["ownerReferences"][0]["uid"] == "u-1"
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["serviceAccountName"] == "clicks-compactor"
    assert {"name": "BATON_STREAMAPP", "value": "ns/clicks"} in pod["containers"][0]["env"]
    args = pod["containers"][0]["args"]
    assert args[:5] == ["compact", "--snapshot-store", "s3a://b/snap", "--keep", "2"]
    assert args[-4:] == ["--application-id", "cc-blue", "--application-id", "cc-green"]
    assert {"name": "X", "value": "1"} in pod["containers"][0]["env"]
    assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
    flipping = cronjob(_app(enabled=True, snapshotStore="/x"), flip_in_progress=True)
    assert flipping is not None and flipping["spec"]["suspend"] is True
    suspended = cronjob(_app(enabled=True, snapshotStore="/x", suspend=True))
    assert suspended is not None and suspended["spec"]["suspend"] is True


def test_cronjob_with_a_volume_claim_and_rolling_upgrades() -> None:
    body = _app(enabled=True, snapshotVolumeClaim="snaps")
    body["spec"]["upgrade"] = {"strategy": "Rolling"}
    job = cronjob(body)
    assert job is not None
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert {"name": "snapshots", "persistentVolumeClaim": {"claimName": "snaps"}} in pod["volumes"]
    args = pod["containers"][0]["args"]
    assert args[args.index("--snapshot-store") + 1] == SNAPSHOT_MOUNT
    assert args.count("--application-id") == 1 and "cc-blue" in args


TOPIC_ID = "qwOcp9VkQU+5FImcZdUbPg"


def _manifest(folder: Path, end: int, records: int = 0, topic_id: str | None = TOPIC_ID) -> None:
    folder.mkdir(parents=True)
    manifest = {"topic": "t", "partition": 0, "end_offset": end, "records": records, "topic_id": topic_id}
    (folder / snapshot.MANIFEST).write_text(json.dumps(manifest))


def test_snapshot_layout_and_choice(tmp_path: Path) -> None:
    assert snapshot.snapshot_name(42) == "snapshot-00000000000000000042"
    assert snapshot.end_of(snapshot.snapshot_name(42)) == 42
    assert snapshot.end_of("snapshot-x") is None and snapshot.end_of("_staging") is None
    base = Path(snapshot.partition_dir(str(tmp_path), "app", "s", 0))
    for end in (100, 200, 300):
        _manifest(base / snapshot.snapshot_name(end), end)
    (base / snapshot.snapshot_name(400)).mkdir()  # unfinished: no manifest
    assert [s.end_offset for s in snapshot.snapshots(str(tmp_path), "app", "s", 0)] == [300, 200, 100]
    newest = snapshot.newest(f"file://{tmp_path}", "app", "s", 0, topic_id=TOPIC_ID)
    assert newest is not None and newest.end_offset == 300
    # a changelog truncated (low moved), or past its end, rules snapshots out
    chosen = snapshot.newest(str(tmp_path), "app", "s", 0, topic_id=TOPIC_ID, high=250)
    assert chosen is not None and chosen.end_offset == 200
    assert snapshot.newest(str(tmp_path), "app", "s", 0, topic_id=TOPIC_ID, low=301) is None
    assert snapshot.newest(str(tmp_path), "app", "s", 1, topic_id=TOPIC_ID) is None
    with pytest.raises(ValueError, match="hdfs:// is written by the compactor only"):
        snapshot.newest("hdfs://namenode/x", "app", "s", 0, topic_id=TOPIC_ID)


def test_a_snapshot_of_a_deleted_and_recreated_changelog_is_refused_with_the_reason(tmp_path: Path) -> None:
    """Offsets cannot tell: the recreated changelog has grown past the old snapshot's end."""
    base = Path(snapshot.partition_dir(str(tmp_path), "app", "s", 0))
    _manifest(base / snapshot.snapshot_name(100), 100, topic_id="old-incarnation")
    _manifest(base / snapshot.snapshot_name(50), 50, topic_id=TOPIC_ID)
    _manifest(base / snapshot.snapshot_name(120), 120, topic_id=None)  # an older compactor's
    found = snapshot.snapshots(str(tmp_path), "app", "s", 0)
    chosen, refused = snapshot.choose(found, topic_id=TOPIC_ID, low=0, high=500)
    assert chosen is not None and chosen.end_offset == 50
    reasons = {s.end_offset: why for s, why in refused}
    assert "another incarnation of the changelog (topic id old-incarnation" in reasons[100]
    assert "deleted and recreated" in reasons[100]
    assert "no topic id" in reasons[120]
    # the topic id unknown (no Describe): nothing is used
    unknown, refused = snapshot.choose(found, topic_id=None, low=0, high=500)
    assert unknown is None and all("could not be read" in why for s, why in refused if s.topic_id)
    # the compactor neither builds on them nor counts them: they can never be used again
    candidates = [
        Candidate(100, "/a/100", topic_id="old-incarnation"),
        Candidate(50, "/a/50", topic_id=TOPIC_ID),
    ]
    plan = incremental.plan(candidates, topic_id=TOPIC_ID, low=0, high=500, delete_retention_ms=None, now=0)
    assert set(plan.refused) == {"/a/100"} and "recreated" in plan.refused["/a/100"]
    only_old = incremental.plan(
        candidates[:1], topic_id=TOPIC_ID, low=0, high=500, delete_retention_ms=86_400_000, now=0
    )
    assert only_old.base is None and "no usable snapshot (/a/100: it was taken of another" in only_old.reason
    # with the id unknown, nothing is declared unusable (nothing is deleted)
    assert (
        incremental.plan(candidates, topic_id=None, low=0, high=500, delete_retention_ms=None, now=0).refused
        == {}
    )


def test_an_empty_snapshot_sets_the_checkpoint(tmp_path: Path) -> None:
    _manifest(tmp_path / snapshot.snapshot_name(7), 7)
    snap = snapshot.snapshots(str(tmp_path.parent), tmp_path.name, "", 0)
    assert snap == []  # layout is app/store/partition: a bare folder is not a snapshot store
    store = MemoryStore()
    found = snapshot.Snapshot(str(tmp_path / snapshot.snapshot_name(7)), "t", 0, 7, 0, {})
    assert snapshot.load_into(store, found) == 0
    assert store.checkpoint() == 7


def test_recompute_plans_skip_repartitioning_subtopologies() -> None:
    direct = Topology()
    direct.stream("clicks").group_by_key().count(store="c")
    assert [(p.subtopology, p.topics, p.stores) for p in plans(direct.build())[0]] == [(0, ["clicks"], ["c"])]
    regrouped = Topology()
    regrouped.stream("clicks").group_by(lambda k, v: v).count(store="c")
    ok, skipped = plans(regrouped.build())
    assert ok == [] and skipped and "repartition" in skipped[0]


def test_the_compactor_identity_is_bound_to_the_compactor_cluster_role_in_its_namespace() -> None:
    """No Role of the operator's making: a RoleBinding (namespaced) to the ClusterRole the
    operator may bind, which grants StreamApps' status (operator/core/rbac.py compactor_rules)."""
    sa, binding = compactor_identity(_app(enabled=True, snapshotStore="/x"), "rel-baton-compactor")
    assert sa["kind"] == "ServiceAccount" and sa["metadata"]["name"] == "clicks-compactor"
    assert binding["kind"] == "RoleBinding" and binding["metadata"]["namespace"] == "ns"
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "rel-baton-compactor",
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "clicks-compactor", "namespace": "ns"}]
    assert all(o["metadata"]["ownerReferences"][0]["uid"] == "u-1" for o in (sa, binding))


def test_status_summary_from_a_report() -> None:
    report = {
        "seconds": 12.5,
        "summary": {
            "partitions": 8,
            "snapshots_written": 3,
            "records_read": 50,
            "live_keys": 10,
            "compaction_lag": 40,
            "tombstones": 2,
            "bytes": 900,
            "findings": 1,
            "finding_kinds": ["cleanup-policy"],
        },
    }
    status = compaction_status(report, "2026-11-22T10:00:00+00:00", "/s/a/_audit/latest.json")
    assert status["compactionLag"] == 40 and status["findingKinds"] == ["cleanup-policy"]
    assert status["lastRunTime"] == "2026-11-22T10:00:00+00:00" and status["findings"] == 1
    assert parse_streamapp("ns/app") == ("ns", "app")
    for bad in ("app", "/app", "ns/", "a/b/c"):
        with pytest.raises(ValueError, match="NAMESPACE/NAME"):
            parse_streamapp(bad)


def test_what_the_audit_could_not_compare_is_counted_and_said() -> None:
    audits = {
        "recompute": {
            "skipped": ["subtopology 1: joins a table"],
            "apps": {"a-blue": {"compared": True}, "a-green": {"compared": False, "reason": "input moved"}},
        },
        "colors": {"a": {"compared": False, "reason": "the colors are not at the same input position"}},
    }
    reasons = not_compared(audits)
    assert reasons == [
        "recompute: subtopology 1: joins a table",
        "recompute a-green: input moved",
        "colors a: the colors are not at the same input position",
    ]
    assert not_compared({}) == []
    report = {
        "seconds": 1.0,
        "summary": {
            "partitions": 1,
            "snapshots_written": 0,
            "records_read": 0,
            "live_keys": 0,
            "compaction_lag": 0,
            "tombstones": 0,
            "bytes": 0,
            "findings": 0,
            "finding_kinds": [],
            "not_compared": 3,
            "not_compared_reasons": reasons,
        },
    }
    status = compaction_status(report, "2026-11-25T10:00:00+00:00", "/r")
    assert status["notCompared"] == 3 and status["notComparedReasons"] == reasons


def test_a_snapshot_past_the_tombstone_horizon_is_not_restored_from(tmp_path: Path) -> None:
    """Deletes after a snapshot live only as tombstones, which the log cleaner drops after
    delete.retention.ms: a restore from a snapshot older than that could bring keys back."""
    folder = Path(snapshot.partition_dir(str(tmp_path), "app", "s", 0)) / snapshot.snapshot_name(10)
    folder.mkdir(parents=True)
    (folder / snapshot.MANIFEST).write_text(
        json.dumps(
            {
                "topic": "t",
                "partition": 0,
                "end_offset": 10,
                "records": 1,
                "created_at": "2026-11-25T00:00:00+00:00",
            }
        )
    )
    snap = snapshot.snapshots(str(tmp_path), "app", "s", 0)[0]
    made = datetime.fromisoformat("2026-11-25T00:00:00+00:00").timestamp()
    day_ms = 86_400_000
    assert snapshot.within_tombstone_horizon(snap, day_ms, made + 3600)
    assert not snapshot.within_tombstone_horizon(snap, day_ms, made + 86_400 - 60)  # inside the skew margin
    assert not snapshot.within_tombstone_horizon(snap, 1000, made + 2)  # a 1 s retention never allows one
    assert not snapshot.within_tombstone_horizon(snap, None, made)  # retention unknown
    # a later run that found the same end vouches from its own start
    (folder / snapshot.CHECKED).write_text(json.dumps({"checked_at": "2026-11-26T00:00:00+00:00"}))
    assert snapshot.fresh_as_of(snap) == made + 86_400
    assert snapshot.within_tombstone_horizon(snap, day_ms, made + 86_400 + 3600)
    (folder / snapshot.CHECKED).write_text("{not json")
    assert snapshot.fresh_as_of(snap) == made
    _manifest(Path(snapshot.partition_dir(str(tmp_path), "other", "s", 0)) / snapshot.snapshot_name(5), 5)
    old = snapshot.snapshots(str(tmp_path), "other", "s", 0)[0]
    assert snapshot.fresh_as_of(old) is None and not snapshot.within_tombstone_horizon(old, day_ms, made)


def _candidate(end: int, created: str = "2026-11-25T00:00:00+00:00", checked: str | None = None) -> Candidate:
    return Candidate(end, f"/s/snapshot-{end}", created, checked, TOPIC_ID)


def test_an_incremental_run_builds_on_the_newest_snapshot_inside_the_changelog_and_the_horizon() -> None:
    made = datetime.fromisoformat("2026-11-25T00:00:00+00:00").timestamp()
    day = 86_400_000

    def fresh(candidates: list[Candidate]) -> Plan:
        return incremental.plan(
            candidates, topic_id=TOPIC_ID, low=5, high=90, delete_retention_ms=day, now=made + 3600
        )

    assert fresh([]) == Plan(5, None, "no snapshot yet")
    chosen = fresh([_candidate(40), _candidate(70), _candidate(20)])
    assert (chosen.read_from, chosen.base, chosen.reason) == (70, _candidate(70), "incremental")
    # unchanged since the newest snapshot: neither read nor written, the base is the content
    same = fresh([_candidate(90)])
    assert (same.read_from, same.reason, same.unchanged) == (90, "unchanged", True)
    assert not chosen.unchanged
    # a snapshot past the end (the changelog was recreated) or below its start is not a base
    assert fresh([_candidate(95)]).base is None
    low = fresh([_candidate(3)])
    assert (low.read_from, low.base) == (5, None) and "below the changelog's first offset 5" in low.reason
    assert fresh([_candidate(95), _candidate(40)]).read_from == 40

    # tombstones after the base may be gone: read the whole changelog rather than resurrect keys
    old = incremental.plan(
        [_candidate(70)], topic_id=TOPIC_ID, low=5, high=90, delete_retention_ms=day, now=made + 86_400
    )
    assert (old.read_from, old.base) == (5, None) and "tombstone horizon" in old.reason
    unknown = incremental.plan(
        [_candidate(70)], topic_id=TOPIC_ID, low=5, high=90, delete_retention_ms=None, now=made
    )
    assert unknown.base is None
    # a later run that found the same end vouches for it
    vouched = _candidate(70, checked="2026-11-26T00:00:00+00:00")
    assert (
        incremental.plan(
            [vouched], topic_id=TOPIC_ID, low=5, high=90, delete_retention_ms=day, now=made + 86_400
        ).base
        == vouched
    )

    assert incremental.retention_ms({"delete.retention.ms": "86400000"}) == day
    assert (
        incremental.retention_ms({}) is None
        and incremental.retention_ms({"delete.retention.ms": "x"}) is None
    )


def test_compaction_lag_of_an_incremental_run_counts_only_what_it_read() -> None:
    full = PartitionStats(records=100, live_keys=10)
    assert full.compaction_lag == 90
    # 30 records read after the base; 4 of the 10 live keys were written by them
    assert PartitionStats(records=30, live_keys=10, live_read=4).compaction_lag == 26


def test_a_snapshot_is_read_in_bounded_batches_without_tombstones(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = Path(snapshot.partition_dir(str(tmp_path), "app", "s", 0)) / snapshot.snapshot_name(10)
    _manifest(folder, 10, records=24)
    keys = [b"k%d" % i for i in range(25)] + [None]
    values = [b"v%d" % i for i in range(24)] + [None, b"orphan"]
    table = pa.table({"key": pa.array(keys, pa.binary()), "value": pa.array(values, pa.binary())})
    pq.write_table(table, folder / "part-0.parquet", row_group_size=7, compression="snappy")
    snap = snapshot.snapshots(str(tmp_path), "app", "s", 0)[0]
    assert dict(snapshot.read(snap, batch=3)) == {b"k%d" % i: b"v%d" % i for i in range(24)}
    store = MemoryStore()
    assert snapshot.load_into(store, snap, batch=5) == 24
    assert store.checkpoint() == 10


def test_the_cronjob_passes_spark_resources_and_the_pod_ip_for_a_cluster_driver() -> None:
    spark = {"driverMemory": "4g", "executorMemory": "2g", "executorCores": 2, "maxCores": 4}
    job = cronjob(
        _app(
            enabled=True,
            snapshotStore="/x",
            sparkMaster="spark://spark-master:7077",
            spark={**spark, "conf": {"spark.sql.shuffle.partitions": "64"}},
        )
    )
    assert job is not None
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert args[args.index("--master") + 1] == "spark://spark-master:7077"
    confs = [args[i + 1] for i, a in enumerate(args) if a == "--conf"]
    assert confs == [
        "spark.driver.memory=4g",
        "spark.executor.memory=2g",
        "spark.executor.cores=2",
        "spark.cores.max=4",
        "spark.sql.shuffle.partitions=64",
    ]
    pod_ip = {"name": "BATON_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    assert pod_ip in container["env"]
    with pytest.raises(ValueError, match=r"spark\.driver\.memory"):
        cronjob(
            _app(
                enabled=True,
                snapshotStore="/x",
                spark={"driverMemory": "1g", "conf": {"spark.driver.memory": "2g"}},
            )
        )


def test_spark_session_settings() -> None:
    local = settings("local[2]", None, "10.0.0.7")
    assert "spark.driver.host" not in local and "spark.sql.shuffle.partitions" not in local
    cluster = settings("spark://m:7077", {"spark.executor.memory": "2g"}, "10.0.0.7")
    assert cluster["spark.driver.host"] == "10.0.0.7" and cluster["spark.driver.bindAddress"] == "0.0.0.0"
    assert cluster["spark.executor.memory"] == "2g"
    assert settings("spark://m:7077", {"spark.ui.enabled": "true"}, None)["spark.ui.enabled"] == "true"


def test_s3a_settings_match_what_the_workers_use(monkeypatch: pytest.MonkeyPatch) -> None:
    """Path-style on the same endpoint, a region, s3:// as s3a://, the S3A jars on both class
    paths, and the driver's AWS variables passed on to executors (which write the parts)."""
    monkeypatch.setenv(CLASSPATH_ENV, "/opt/s3a/hadoop-aws.jar:/opt/s3a/bundle.jar")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "id")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    conf = hadoop_settings("s3a://b/x", S3Settings("http://127.0.0.1:9000"))
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:9000"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.endpoint.region"] == "us-east-1"
    assert conf["spark.hadoop.fs.s3.impl"].endswith("S3AFileSystem")
    assert conf["spark.driver.extraClassPath"] == conf["spark.executor.extraClassPath"]
    assert conf["spark.executorEnv.AWS_SECRET_ACCESS_KEY"] == "secret"
    assert "spark.executorEnv.AWS_SESSION_TOKEN" not in conf
    aws = hadoop_settings("s3://b/x", S3Settings(region="eu-west-1"))
    assert aws["spark.hadoop.fs.s3a.endpoint.region"] == "eu-west-1"
    assert "spark.hadoop.fs.s3a.endpoint" not in aws and "spark.hadoop.fs.s3a.path.style.access" not in aws
    assert hadoop_settings("/var/lib/snaps", S3Settings("http://x:1")) == {}
    with pytest.raises(ValueError, match="http:// or https://"):
        S3Settings("127.0.0.1:9000")


def test_a_local_store_is_read_through_the_same_filesystem_layer(tmp_path: Path) -> None:
    filesystem, root = open_store(f"file://{tmp_path}/")
    assert root == str(tmp_path)
    assert type(filesystem).__name__ == "LocalFileSystem"
    assert open_store(str(tmp_path))[1] == str(tmp_path)


def test_the_cronjob_runs_the_operators_compactor_image_unless_the_app_names_one() -> None:
    """The app's image has no Java: the default is the compactor image of Baton's version."""
    default = cronjob(_app(enabled=True, snapshotStore="/x"))
    assert default is not None
    pod = default["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert (
        pod["containers"][0]["image"] == DEFAULT_IMAGE == f"ghcr.io/baton-dev/baton-compactor:{__version__}"
    )
    custom = cronjob(_app(enabled=True, snapshotStore="/x"), default_image="registry.local/compactor:1")
    assert custom is not None
    assert custom["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.local/compactor:1"
    )
    own = cronjob(_app(enabled=True, snapshotStore="/x", image="registry.local/app-compactor:3"))
    assert own is not None
    assert own["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] == (
        "registry.local/app-compactor:3"
    )


def test_the_job_runs_where_the_workers_may_run() -> None:
    """A tainted node pool for stream apps: the Job tolerates what the workers tolerate."""
    app = _app(enabled=True, snapshotStore="/x")
    toleration = {"key": "dedicated", "operator": "Equal", "value": "streams", "effect": "NoSchedule"}
    app["spec"]["podTemplate"] = {
        "nodeSelector": {"pool": "streams"},
        "tolerations": [toleration],
        "imagePullSecrets": [{"name": "registry"}],
        "affinity": {"podAntiAffinity": {}},
        "env": [{"name": "X", "value": "1"}],
    }
    job = cronjob(app)
    assert job is not None
    pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"pool": "streams"} and pod["tolerations"] == [toleration]
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert "affinity" not in pod and "priorityClassName" not in pod
    bare = cronjob(_app(enabled=True, snapshotStore="/x"))
    assert bare is not None
    assert not {"nodeSelector", "tolerations"} & set(bare["spec"]["jobTemplate"]["spec"]["template"]["spec"])


def test_the_job_runs_as_the_images_user_with_its_group_on_the_volumes() -> None:
    """The operator mounts the Kafka Secrets 0440: without fsGroup the non-root process could
    not read its own CA and key (found when the Job first ran under a real kubelet)."""
    from baton.images import RUN_AS_USER

    job = cronjob(_app(enabled=True, snapshotStore="/x"))
    assert job is not None
    context = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["securityContext"]
    assert context["runAsUser"] == context["fsGroup"] == RUN_AS_USER and context["runAsNonRoot"] is True


def test_a_recomputation_needs_the_input_from_its_start() -> None:
    """Retention that removed the input's start makes a recomputation differ for that reason
    alone: the audit says it could not compare instead of reporting divergence."""
    from baton.compactor.recompute import Plan as RecomputePlan
    from baton.compactor.recompute import order_columns, replay_ranges

    plan = RecomputePlan(0, ["clicks"], ["counts"])
    positions = {("clicks", 0): 500, ("clicks", 1): 0, ("other", 0): 9}
    ids = {"clicks": "id-1"}
    replay = replay_ranges(plan, positions, {("clicks", 0): 0, ("clicks", 1): 0}, ids, None)
    assert (replay.gap, replay.ranges, replay.offsets) == ("", {"clicks": {0: (0, 500), 1: (0, 0)}}, 500)
    # a partition the app never read past is no gap; another topic is not this plan's
    assert replay_ranges(plan, positions, {("clicks", 1): 40, ("other", 0): 3}, ids, None).gap == ""
    gap = replay_ranges(plan, positions, {("clicks", 0): 120}, ids, None).gap
    assert "clicks-0 below offset 120" in gap and "cannot be recomputed from the start" in gap
    assert order_columns(plan) == ["offset"]
    assert order_columns(RecomputePlan(0, ["a", "b"], ["s"])) == ["ts", "topic", "offset"]


def test_a_recomputation_goes_on_from_the_last_audit() -> None:
    """The last audit's recomputation is the start: only the input after it is replayed, and
    retention below it does not matter; a recreated input topic or a reset app starts over."""
    from baton.compactor.recompute import Baseline, replay_ranges
    from baton.compactor.recompute import Plan as RecomputePlan

    plan = RecomputePlan(0, ["clicks"], ["counts"])
    positions = {("clicks", 0): 500, ("clicks", 1): 70}
    baseline = Baseline("state-1", {("clicks", 0): 400, ("clicks", 1): 70}, {"clicks": "id-1"})
    assert Baseline.from_json(baseline.to_json()) == baseline
    lows = {("clicks", 0): 300, ("clicks", 1): 70}  # below the baseline: gone, and not needed
    replay = replay_ranges(plan, positions, lows, {"clicks": "id-1"}, baseline)
    assert (replay.baseline, replay.gap, replay.why_not_baseline) == (baseline, "", "")
    assert (replay.ranges, replay.offsets) == ({"clicks": {0: (400, 500), 1: (70, 70)}}, 100)
    # retention past the baseline: the records after it are gone too
    late = replay_ranges(plan, positions, {("clicks", 0): 450}, {"clicks": "id-1"}, baseline)
    assert "clicks-0 below offset 450" in late.gap and "after the last audited position" in late.gap
    # the topic recreated: from its start (and its start is there)
    fresh = replay_ranges(plan, positions, {}, {"clicks": "id-2"}, baseline)
    assert fresh.baseline is None and "recreated" in fresh.why_not_baseline
    assert fresh.ranges == {"clicks": {0: (0, 500), 1: (0, 70)}}
    # the app reset to an earlier position: the baseline is ahead of it
    reset = replay_ranges(plan, {("clicks", 0): 10}, {}, {"clicks": "id-1"}, baseline)
    assert (
        reset.baseline is None
        and "went back" in reset.why_not_baseline
        and "clicks-0" in reset.why_not_baseline
    )
    assert Baseline.from_json({"format": 99}) is None  # a layout this version does not know
    # an input topic deleted (no id now): nothing to replay from, said as such
    gone = replay_ranges(plan, positions, {}, {}, baseline)
    assert "the input topic is gone (clicks)" in gone.gap and gone.ranges == {}
    # a topic the plan names but the app never read (a setting pointing elsewhere) needs no id
    assert replay_ranges(plan, {}, {}, {}, None).gap == ""
