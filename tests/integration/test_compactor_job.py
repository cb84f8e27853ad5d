"""The compactor against the real broker and real workers, with PySpark on the stack's cluster.

One SparkSession serves the module (starting one costs 10-20 s); it can write the stack's
MinIO through S3A as well as local paths. Changelogs come from the click counter example
run by real ``baton run`` subprocesses on real input.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from batondev import kafka as stack_kafka
from batondev import objectstore, tls
from batondev import spark as spark_jars
from batondev.paths import CLICK_COUNTER, REPO
from click.testing import CliRunner
from confluent_kafka import KafkaException, Producer
from pyarrow import fs as pafs

from baton.compactor.cli import compact
from baton.compactor.job import JobConfig, run
from baton.compactor.s3a import CLASSPATH_ENV, hadoop_settings
from baton.compactor.session import session
from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.env import SASL_PASSWORD_VAR, SASL_USERNAME_VAR
from baton.operator.core.compaction.cronjob import compactor_identity, compactor_name
from baton.operator.core.spec import StreamApp
from baton.testing import WorkerProcess, latest_by_key, produce, read_all, wait_for
from baton.worker.config import env_var
from baton.worker.state import snapshot, snapshot_fs
from baton.worker.state.snapshot_uri import S3Settings
from baton.worker.state.stores import RocksDBStore
from tests.conftest import Kube
from tests.support import acls, secured
from tests.support.operator import (
    KubectlFn,
    apply,
    example_manifest,
    get_json,
    install_crds,
    service_account_kubeconfig,
)
from tests.support.scram import SECRET, app_with_secret, scram

pytestmark = pytest.mark.integration

STORE = "user-counts-store"
PARTITIONS = 4


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    """The job on the stack's standalone Spark cluster (a master, two one-core workers): executors
    in JVMs of their own, jars shipped by the driver, a real shuffle. Local mode runs in the
    Spark smoke test and in bench/compaction.py."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    master = spark_jars.cluster_up()
    try:
        endpoint = objectstore.up()
        s3_env = {**objectstore.client_env(), CLASSPATH_ENV: spark_jars.s3a_classpath()}
    except Exception as exc:
        pytest.fail(f"the stack's object store (MinIO) or the S3A jars did not come up: {exc}", pytrace=False)
    saved = {k: os.environ.get(k) for k in s3_env}
    os.environ.update(s3_env)  # the driver's S3A reads the AWS chain, and passes it to executors
    _fresh_jvm()
    # tiny inputs: Spark's 200 default shuffle partitions would be mostly scheduling overhead
    conf = {"spark.sql.shuffle.partitions": "4"} | hadoop_settings("s3a://x", S3Settings(endpoint))
    spark_session = session(master, spark_jars.jars(), app_name="baton-compactor-tests", conf=conf)
    assert spark_session.sparkContext.master == master
    jsc = spark_session.sparkContext._jsc.sc()  # block managers: the driver's and each executor's
    wait_for("two executors and the driver", lambda: jsc.getExecutorMemoryStatus().size() >= 3, 60)
    yield spark_session
    spark_session.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


def _fresh_jvm() -> None:
    """Stop the JVM an earlier test in this process started (smoke/test_spark.py): a JVM's class
    path is fixed at launch, so that one has no S3A jars and s3a:// would not resolve in it."""
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    gateway.shutdown()
    proc = getattr(gateway, "proc", None)
    if proc is not None:  # pyspark's gateway JVM also exits when its stdin closes
        proc.terminate()
        proc.wait(timeout=30)
    SparkContext._gateway = None
    SparkContext._jvm = None


def _store(kind: str, tmp: Path, name: str) -> tuple[str, dict[str, str]]:
    """A snapshot store of ``kind`` and the environment a worker reads it with."""
    if kind == "path":
        root = str(tmp / "snapshots")
        return root, {env_var("snapshot_store"): root}
    root = f"s3a://{objectstore.BUCKET}/{name}"
    return root, {
        env_var("snapshot_store"): root,
        env_var("snapshot_s3_endpoint"): objectstore.endpoint(),
        **objectstore.client_env(),
    }


def _clicks(start: int, n: int, users: int) -> list[tuple[bytes, bytes]]:
    return [
        (f"u{i % users}".encode(), orjson.dumps({"user_id": f"u{i % users}", "timestamp": i}))
        for i in range(start, start + n)
    ]


class App:
    """One application id of the click counter on a clicks topic, with helpers to feed it and read its state."""

    def __init__(self, bootstrap: str, app_id: str, clicks: str, counts: str, tmp: Path) -> None:
        self.bootstrap, self.app_id, self.clicks, self.counts, self.tmp = (
            bootstrap,
            app_id,
            clicks,
            counts,
            tmp,
        )
        self.expected: Counter[str] = Counter()
        self.changelog = f"{app_id}-{STORE}-changelog"

    def worker(self, state: str, env: dict[str, str] | None = None) -> WorkerProcess:
        return WorkerProcess(
            CLICK_COUNTER,
            bootstrap=self.bootstrap,
            application_id=self.app_id,
            state_dir=self.tmp / state,
            log_path=self.tmp / f"{self.app_id}-{state}.log",
            instance_id="w",
            extra_args=["--no-write-cache"],
            env={"CLICKS_TOPIC": self.clicks, "COUNTS_TOPIC": self.counts, **(env or {})},
        )

    def feed(self, start: int, n: int, users: int, *, produce_input: bool = True) -> None:
        batch = _clicks(start, n, users)
        self.expected.update(k.decode() for k, _ in batch)
        if produce_input:
            produce(self.bootstrap, self.clicks, batch)
        wait_for(
            f"{self.app_id}: counts never matched", lambda: self.sink() == dict(self.expected), 90, every=1
        )

    def sink(self) -> dict[str, int]:
        return {
            k.decode(): int(v)
            for k, v in latest_by_key(read_all(self.bootstrap, self.counts)).items()
            if k is not None and v is not None
        }

    def store(self, state: str, partition: int) -> tuple[dict[bytes, bytes], int | None]:
        """A stopped worker's RocksDB store of one partition: content and checkpoint."""
        db = RocksDBStore(self.tmp / state / self.app_id / f"0_{partition}" / STORE)
        try:
            return dict(db.items()), db.checkpoint()
        finally:
            db.close()


def _app(
    kafka_bootstrap: str, new_topic: Callable[..., str], app_id: str, tmp: Path, clicks: str | None = None
) -> App:
    clicks = clicks or new_topic(PARTITIONS, name=f"{app_id}-clicks")
    return App(kafka_bootstrap, app_id, clicks, new_topic(PARTITIONS, name=f"{app_id}-counts"), tmp)


def test_snapshot_equals_the_store_at_the_covered_offset(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    app = _app(kafka_bootstrap, new_topic, unique_name, tmp_path)
    root = str(tmp_path / "snapshots")
    w = app.worker("a").start()
    w.wait_ready()
    app.feed(0, 3000, 97)
    assert w.stop() == 0

    report = run(spark, JobConfig(kafka_bootstrap, [app.app_id], root, keep=2))
    assert report["summary"]["records_read"] == 3000  # cache off: one changelog record per click
    assert report["summary"]["live_keys"] == 97
    assert report["findings"] == []
    changelog = read_all(kafka_bootstrap, app.changelog)
    for p in range(PARTITIONS):
        snap = next(iter(snapshot.snapshots(root, app.app_id, STORE, p)), None)
        assert snap is not None
        content = dict(snapshot.read(snap))
        store, checkpoint = app.store("a", p)
        assert checkpoint is not None and checkpoint <= snap.end_offset
        # the store reflects the changelog up to its checkpoint; nothing was committed between it and the end
        assert not [
            r for r in read_all(kafka_bootstrap, app.changelog, start={p: checkpoint}) if r.partition == p
        ]
        assert content == store, f"partition {p}"
        # and a plain consumer's replay of [0, end_offset) agrees
        replay = latest_by_key(r for r in changelog if r.partition == p and r.offset < snap.end_offset)
        assert content == {k: v for k, v in replay.items() if k is not None and v is not None}
        assert snap.records == len(content)

    # nothing new: no new snapshot; new input: one more per partition, and only `keep` are kept.
    # (A topology the image cannot import, as in the plain compactor image: said, not fatal.)
    idle = run(spark, JobConfig(kafka_bootstrap, [app.app_id], root, keep=2, topology="apps.not_in_image"))
    assert idle["summary"]["snapshots_written"] == 0
    # and nothing read: every partition is unchanged since its snapshot
    assert idle["summary"]["records_read"] == 0 and idle["summary"]["live_keys"] == 97
    assert {p["plan"] for p in idle["partitions"]} == {"unchanged"}
    assert idle["summary"]["not_compared"] == 1, idle["summary"]
    assert "not importable in the compactor's image" in idle["summary"]["not_compared_reasons"][0]
    for round_ in (1, 2):
        w.start()
        w.wait_ready()
        app.feed(3000 * round_, 400, 97)
        assert w.stop() == 0
        report = run(spark, JobConfig(kafka_bootstrap, [app.app_id], root, keep=2))
        assert report["summary"]["snapshots_written"] == PARTITIONS
        # incremental: the earlier snapshot plus only the 400 records written since
        assert report["summary"]["records_read"] == 400, report["summary"]
        assert {p["plan"] for p in report["partitions"]} == {"incremental"}
        assert all(p["read_from"] > p["start_offset"] for p in report["partitions"])
    for p in range(PARTITIONS):
        kept = snapshot.snapshots(root, app.app_id, STORE, p)
        assert len(kept) == 2
        assert dict(snapshot.read(kept[0])) == app.store("a", p)[0]


@pytest.mark.parametrize("kind", ["path", "s3"])
def test_restore_from_a_snapshot_reads_fewer_records_and_ends_identical(  # noqa: PLR0917
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
    kind: str,
) -> None:
    """A local path and an object store (MinIO through S3A in the job, pyarrow in the worker)."""
    app = _app(kafka_bootstrap, new_topic, unique_name, tmp_path)
    root, store_env = _store(kind, tmp_path, unique_name)
    a = app.worker("a").start()
    a.wait_ready()
    app.feed(0, 3000, 50)
    assert a.stop() == 0
    run(spark, JobConfig(kafka_bootstrap, [app.app_id], root))
    a.start()
    a.wait_ready()
    app.feed(3000, 500, 50)  # the changelog after the snapshot
    assert a.stop() == 0
    total = len(read_all(kafka_bootstrap, app.changelog))
    assert total == 3500

    if kind == "s3":  # the objects are really in the bucket, where plain pyarrow finds them
        s3fs, prefix = snapshot_fs.open_store(root, S3Settings(objectstore.endpoint()))
        parts = s3fs.get_file_info(pafs.FileSelector(prefix, recursive=True))
        assert sum(i.base_name.endswith(".parquet") for i in parts) >= PARTITIONS
    with_snapshot = app.worker("b", env=store_env).start()
    with_snapshot.wait_ready()
    assert with_snapshot.stop() == 0
    without = app.worker("c").start()
    without.wait_ready()
    assert without.stop() == 0

    assert without.restored() == total
    assert with_snapshot.restored() == 500 < total
    loaded = [line for line in with_snapshot.logs() if line.get("msg") == "store loaded from snapshot"]
    assert len(loaded) == PARTITIONS and sum(int(str(line["records"])) for line in loaded) == 50
    for p in range(PARTITIONS):
        b_store, b_checkpoint = app.store("b", p)
        c_store, c_checkpoint = app.store("c", p)
        assert b_store == c_store == app.store("a", p)[0]
        assert b_checkpoint == c_checkpoint
    assert sum(int(v) for p in range(PARTITIONS) for v in app.store("b", p)[0].values()) == 3500


def test_audit_flags_divergence_and_a_delete_policy_and_nothing_on_a_clean_app(  # noqa: PLR0917
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    kube: Kube,
    kubectl: KubectlFn,
    namespace: str,
) -> None:
    clicks = new_topic(PARTITIONS, name=f"{unique_name}-clicks")
    blue = _app(kafka_bootstrap, new_topic, f"{unique_name}-blue", tmp_path, clicks)
    green = _app(kafka_bootstrap, new_topic, f"{unique_name}-green", tmp_path, clicks)
    workers = [blue.worker("state").start(), green.worker("state").start()]
    for w in workers:
        w.wait_ready()
    produce(kafka_bootstrap, clicks, _clicks(0, 2000, 40))
    blue.feed(0, 2000, 40, produce_input=False)
    green.feed(0, 2000, 40, produce_input=False)
    for w in workers:
        assert w.stop() == 0
    root = str(tmp_path / "snapshots")
    monkeypatch.setenv("CLICKS_TOPIC", clicks)  # the topology reads its topic names from the environment
    # The StreamApp whose status the job writes, as the ServiceAccount the operator makes for its CronJob.
    install_crds(kubectl)
    sapp = example_manifest(namespace, compaction={"enabled": True, "snapshotStore": root})
    apply(kubectl, sapp)
    body = get_json(kubectl, "sapp", "click-counter", "-n", namespace)
    for obj in compactor_identity(body):
        apply(kubectl, obj)
    monkeypatch.setenv(
        "KUBECONFIG",
        str(
            service_account_kubeconfig(
                kubectl, kube, namespace, compactor_name(body), tmp_path / "compactor.kubeconfig"
            )
        ),
    )
    args = [
        "--application-id",
        blue.app_id,
        "--application-id",
        green.app_id,
        "--snapshot-store",
        root,
        "--bootstrap-servers",
        kafka_bootstrap,
        "--topology",
        str(CLICK_COUNTER),
        "--fail-on-findings",
        "--streamapp",
        f"{namespace}/click-counter",
    ]

    def audit(expect_exit: int) -> dict[str, Any]:
        result = CliRunner().invoke(compact, args, catch_exceptions=False)
        assert result.exit_code == expect_exit, result.output
        report: dict[str, Any] = orjson.loads(
            (Path(root) / blue.app_id / "_audit" / "latest.json").read_bytes()
        )
        return report

    def status() -> dict[str, Any]:
        summary: dict[str, Any] = get_json(kubectl, "sapp", "click-counter", "-n", namespace)["status"][
            "compaction"
        ]
        return summary

    clean = audit(0)
    assert clean["findings"] == []
    summary = status()
    assert (summary["findings"], summary["findingKinds"]) == (0, [])
    assert summary["recordsRead"] == clean["summary"]["records_read"] > 0
    assert summary["reportUri"] == f"{root}/{blue.app_id}/_audit/latest.json"
    assert clean["audits"]["colors"][unique_name]["compared"] is True
    assert clean["audits"]["colors"][unique_name]["stores"][STORE]["compared"] == 40
    for app_id in (blue.app_id, green.app_id):
        first = clean["audits"]["recompute"]["apps"][app_id]["subtopologies"]["0"]
        assert (first["compared"], first["replayed_from"], first["input_offsets"]) == (40, "start", 2000)
    assert "baton_audit_findings" in (Path(root) / blue.app_id / "_audit" / "metrics.prom").read_text()

    # a changelog record that does not follow from the input, and a changelog without compaction
    victim = read_all(kafka_bootstrap, blue.changelog)[0]
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    producer.produce(blue.changelog, b"999999", victim.key, partition=victim.partition)
    assert producer.flush(30) == 0
    new_topic(1, config={"cleanup.policy": "delete"}, name=f"{blue.app_id}-legacy-changelog")

    flagged = audit(3)
    legacy = f"{blue.app_id}-legacy-changelog"
    kinds = Counter(f["kind"] for f in flagged["findings"] if f["topic"] != legacy)
    assert kinds == {"divergence-recompute": 1, "divergence-colors": 1}, flagged["findings"]
    # the broker's default segment settings (1 GiB, 7 days) are flagged too
    assert {f["kind"] for f in flagged["findings"] if f["topic"] == legacy} == {
        "cleanup-policy",
        "segment-bytes",
        "segment-ms",
    }
    recompute = next(f for f in flagged["findings"] if f["kind"] == "divergence-recompute")
    assert recompute["details"]["different"] == 1
    # the input did not grow: the stores were recomputed from the last audit's, replaying nothing
    again = flagged["audits"]["recompute"]["apps"][blue.app_id]["subtopologies"]["0"]
    assert (again["compared"], again["replayed_from"], again["input_offsets"]) == (40, "last audit", 0)
    assert victim.key is not None
    user = victim.key.decode()
    assert recompute["details"]["samples"] == [
        {"key": user, "expected": str(blue.expected[user]), "actual": "999999"}
    ]
    colors = next(f for f in flagged["findings"] if f["kind"] == "divergence-colors")
    assert colors["details"]["different"] == 1 and colors["topic"] == STORE
    summary = status()
    assert summary["findings"] == len(flagged["findings"]) == 5
    assert summary["findingKinds"] == [
        "cleanup-policy",
        "divergence-colors",
        "divergence-recompute",
        "segment-bytes",
        "segment-ms",
    ]

    # the input's retention removes the start of one partition: a recomputation would differ for
    # that reason alone, so it is reported as not compared, never as divergence
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for future in admin.delete_records([TopicPartition(clicks, 0, 100)]).values():
        future.result(30)
    kept = audit(3)  # the last audit's recomputation stands in for the start: compared as before
    kinds = Counter(f["kind"] for f in kept["findings"] if f["topic"] != legacy)
    assert kinds == {"divergence-recompute": 1, "divergence-colors": 1}, kept["findings"]
    # without it (its folder gone), a recomputation from the start cannot be made
    for app_id in (blue.app_id, green.app_id):
        shutil.rmtree(Path(root) / app_id / "_recompute")
    trimmed = audit(3)
    kinds = Counter(f["kind"] for f in trimmed["findings"] if f["topic"] != legacy)
    assert kinds == {"divergence-colors": 1}, trimmed["findings"]
    reasons = trimmed["summary"]["not_compared_reasons"]
    assert any(f"{clicks}-0 below offset 100" in r and "cannot be recomputed" in r for r in reasons), reasons

    # The job's identity reaches StreamApps' status in this namespace and nothing else (the
    # compactor ClusterRole, bound here: the operator writes no per-app Role).
    who = f"--as=system:serviceaccount:{namespace}:{compactor_name(body)}"
    can = kubectl(
        "auth",
        "can-i",
        "patch",
        "streamapps.baton.dev/click-counter",
        "--subresource=status",
        "-n",
        namespace,
        who,
        check=False,
    )
    assert can.stdout.strip() == "yes", can.stdout + can.stderr
    for other, where in (
        (["patch", "streamapps.baton.dev/click-counter", "--subresource=status"], "default"),
        (["patch", "streamapps.baton.dev/click-counter"], namespace),
        (["get", "secrets"], namespace),
        (["create", "pods"], namespace),
    ):
        cannot = kubectl("auth", "can-i", *other, "-n", where, who, check=False)
        assert cannot.stdout.strip() == "no", (other, where, cannot.stdout)


def test_the_cronjob_kafka_settings_reach_spark_over_scram(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """Issue 17: the Job gets the app's SASL settings (the Secret's credentials, librdkafka names,
    as the operator renders them) and the compactor hands Spark's Java client their Java form;
    it reads a changelog through the broker's SCRAM-SHA-512 listener."""
    app = app_with_secret()
    spec: dict[str, Any] = app.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    spec["compaction"] = {"enabled": True, "snapshotStore": str(tmp_path / "snapshots")}
    body = {
        "apiVersion": "baton.dev/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": app.name, "namespace": app.namespace},
        "spec": spec,
    }
    objects = desired_objects(StreamApp.from_body(body))
    job = next(o for o in objects if o["kind"] == "CronJob")
    container = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    # what the kubelet does: Secret values into the variables, then $(VAR) expansion
    secret = {SASL_USERNAME_VAR: SECRET["username"], SASL_PASSWORD_VAR: SECRET["password"]}
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert {SASL_USERNAME_VAR, SASL_PASSWORD_VAR} <= env.keys()
    settings = {
        k: re.sub(r"\$\((\w+)\)", lambda m: secret[m.group(1)], v)
        for k, v in orjson.loads(env["BATON_KAFKA_CONFIG"]).items()
    }
    assert settings["sasl.username"] == SECRET["username"]

    app_id = f"{unique_name}-blue"
    changelog = new_topic(2, name=f"{app_id}-{STORE}-changelog")
    producer = Producer(scram(SECRET["username"], SECRET["password"]))
    latest: dict[bytes, bytes] = {}
    for i in range(400):
        key, value = f"k{i % 37}".encode(), str(i).encode()
        producer.produce(changelog, key=key, value=value, partition=(i % 37) % 2)  # a key stays on one
        latest[key] = value
    assert producer.flush(30) == 0

    root = str(tmp_path / "snapshots")
    config = JobConfig(stack_kafka.scram_bootstrap(), [app_id], root, keep=1, kafka_config=settings)
    report = run(spark, config)
    assert report["summary"]["records_read"] == 400, report["summary"]
    assert _snapshots(root, app_id, partitions=2) == latest


def _snapshots(root: str, app_id: str, partitions: int) -> dict[bytes, bytes]:
    """What the newest snapshot of each of the store's partitions holds, together."""
    got: dict[bytes, bytes] = {}
    for p in range(partitions):
        snap = next(iter(snapshot.snapshots(root, app_id, STORE, p)), None)
        assert snap is not None, f"no snapshot of partition {p}"
        got.update(snapshot.read(snap))
    return got


RESETTING = str(Path(__file__).resolve().parents[1] / "fixtures" / "resetting_counter.py")


class Resetting:
    """The resetting counter (a reset click deletes the user's count) on two partitions."""

    def __init__(self, bootstrap: str, new_topic: Callable[..., str], app_id: str, tmp: Path) -> None:
        self.bootstrap, self.app_id, self.tmp = bootstrap, app_id, tmp
        self.clicks, self.counts = new_topic(2), new_topic(2)
        self.changelog = f"{app_id}-{STORE}-changelog"

    def worker(self, state: str, env: dict[str, str] | None = None) -> WorkerProcess:
        return WorkerProcess(
            RESETTING,
            bootstrap=self.bootstrap,
            application_id=self.app_id,
            state_dir=self.tmp / state,
            log_path=self.tmp / f"{state}.log",
            instance_id="w",
            extra_args=["--no-write-cache"],
            env={"CLICKS_TOPIC": self.clicks, "COUNTS_TOPIC": self.counts, **(env or {})},
        )

    def send(self, users: list[str], reset: bool = False) -> None:
        value = {"reset": True} if reset else {}
        produce(self.bootstrap, self.clicks, [(u.encode(), orjson.dumps(value)) for u in users])

    def store(self, state: str) -> dict[bytes, bytes]:
        """A stopped worker's stores of both partitions, merged."""
        content: dict[bytes, bytes] = {}
        for p in range(2):
            db = RocksDBStore(self.tmp / state / self.app_id / f"0_{p}" / STORE)
            try:
                content.update(db.items())
            finally:
                db.close()
        return content

    def snapshots(self, root: str) -> dict[bytes, bytes]:
        content: dict[bytes, bytes] = {}
        for p in range(2):
            snap = next(iter(snapshot.snapshots(root, self.app_id, STORE, p)), None)
            assert snap is not None, f"no snapshot of partition {p}"
            content.update(snapshot.read(snap))
        return content

    def replay(self) -> dict[bytes, bytes]:
        """What a consumer of the whole changelog holds: the truth a snapshot must equal."""
        return {
            k: v
            for k, v in latest_by_key(read_all(self.bootstrap, self.changelog)).items()
            if k is not None and v is not None
        }


def test_an_incremental_run_merges_new_updates_and_deletes_into_the_previous_snapshot(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """Issue 17: a run after a snapshot reads only the changelog written since and merges it:
    newer values win, tombstones delete keys the base still holds."""
    app = Resetting(kafka_bootstrap, new_topic, unique_name, tmp_path)
    root = str(tmp_path / "snapshots")
    users = [f"u{i}" for i in range(20)]
    a = app.worker("a").start()
    a.wait_ready()
    app.send(users * 3)
    wait_for("changelog of 60 updates", lambda: len(read_all(kafka_bootstrap, app.changelog)) >= 60, 60)
    assert a.stop() == 0
    first = run(spark, JobConfig(kafka_bootstrap, [app.app_id], root))
    assert (first["summary"]["records_read"], first["summary"]["live_keys"]) == (60, 20)
    assert {p["plan"] for p in first["partitions"]} == {"no snapshot yet"}

    a.start()
    a.wait_ready()
    app.send(users[:5], reset=True)
    app.send(users[10:])
    wait_for("15 more changelog records", lambda: len(read_all(kafka_bootstrap, app.changelog)) >= 75, 60)
    assert a.stop() == 0
    second = run(spark, JobConfig(kafka_bootstrap, [app.app_id], root))
    summary = second["summary"]
    assert (summary["records_read"], summary["tombstones"], summary["live_keys"]) == (15, 5, 15), summary
    assert {p["plan"] for p in second["partitions"]} == {"incremental"}
    assert summary["compaction_lag"] == 5  # the tombstones: records read that no live key holds

    content = app.snapshots(root)
    assert {k.decode() for k in content} == set(users[5:])
    assert {k.decode(): orjson.loads(v) for k, v in content.items()} == {
        **{u: 3 for u in users[5:10]},
        **{u: 4 for u in users[10:]},
    }
    assert content == app.replay()

    b = app.worker("b", env={"BATON_SNAPSHOT_STORE": root}).start()
    b.wait_ready()
    assert b.stop() == 0
    assert len([line for line in b.logs() if line.get("msg") == "store loaded from snapshot"]) == 2
    assert b.restored() == 0  # the snapshots cover the whole changelog
    assert app.store("b") == content


def test_a_snapshot_older_than_the_tombstone_horizon_never_resurrects_a_deleted_key(
    spark: Any, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """Issue 17: keys deleted after a snapshot exist only as tombstones, which the log cleaner
    removes after delete.retention.ms (1 s here). Once it has, replaying the changelog after
    the snapshot cannot delete them: the worker must not restore from that snapshot, and the
    next compaction must not build on it."""
    app_id = unique_name
    app = Resetting(kafka_bootstrap, new_topic, app_id, tmp_path)
    changelog = new_topic(
        2,
        name=app.changelog,
        config={
            "cleanup.policy": "compact",
            "delete.retention.ms": "1000",
            "segment.ms": "200",
            "min.cleanable.dirty.ratio": "0.01",
            "min.compaction.lag.ms": "0",
        },
    )
    root = str(tmp_path / "snapshots")
    worker, send = app.worker, app.send

    users = [f"u{i}" for i in range(10)]
    a = worker("a").start()
    a.wait_ready()
    send(users * 3)
    wait_for("changelog of 30 updates", lambda: len(read_all(kafka_bootstrap, changelog)) >= 30, 60)
    assert a.stop() == 0
    run(spark, JobConfig(kafka_bootstrap, [app_id], root, keep=1))
    snaps = [next(iter(snapshot.snapshots(root, app_id, STORE, p)), None) for p in range(2)]
    assert sum(s.records for s in snaps if s is not None) == 10

    a.start()
    a.wait_ready()
    send(users[:5], reset=True)  # deleted after the snapshot: tombstones in the changelog

    def tombstones_cleaned() -> bool:
        send(["filler"])  # new records roll segments, so the tombstones' segment gets cleaned
        records = read_all(kafka_bootstrap, changelog)
        return bool(records) and not any(r.value is None for r in records)

    wait_for("the log cleaner to drop the tombstones", tombstones_cleaned, 120, every=1)
    assert a.stop() == 0
    remaining = {r.key for r in read_all(kafka_bootstrap, changelog)}
    assert not {u.encode() for u in users[:5]} & remaining, "the deletes left no trace in the changelog"

    b = worker("b", env={"BATON_SNAPSHOT_STORE": root}).start()
    b.wait_ready()
    assert b.stop() == 0
    refused = [line for line in b.logs() if str(line.get("msg", "")).startswith("snapshot too old")]
    assert len(refused) == 2, [line.get("msg") for line in b.logs()]
    assert not [line for line in b.logs() if line.get("msg") == "store loaded from snapshot"]
    content = app.store("b")
    assert {k.decode() for k in content} == {*users[5:], "filler"}, sorted(content)
    assert all(orjson.loads(content[u.encode()]) == 3 for u in users[5:])

    # the job reads the whole changelog again rather than merge it into that snapshot
    report = run(spark, JobConfig(kafka_bootstrap, [app_id], root, keep=1))
    assert {p["read_from"] for p in report["partitions"]} == {p["start_offset"] for p in report["partitions"]}
    assert all("tombstone horizon" in p["plan"] for p in report["partitions"]), report["partitions"]
    assert app.snapshots(root) == content == app.replay()


@pytest.mark.parametrize("listener_name", ["mtls", "oauthbearer"])
def test_the_job_reads_through_the_mutual_tls_and_oauth_listeners(  # noqa: PLR0917 (fixtures)
    spark: Any,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
    listener_name: str,
) -> None:
    """The job's own librdkafka clients and Spark's Java Kafka source connect with one set of
    settings: a client certificate (PEM files; Java gets them inline) of a principal holding
    exactly the compactor's documented ACLs, or OAuth client credentials, against listeners
    that enforce them."""
    bootstrap, settings = secured.listener(listener_name)
    if listener_name == "mtls":
        cert = tls.issue_client(f"{unique_name}-compactor", tmp_path)
        acls.grant(f"User:{cert.principal}", acls.compactor_grants(unique_name))
        settings = cert.settings()
    app_id = f"{unique_name}-blue"
    changelog = new_topic(2, name=f"{app_id}-{STORE}-changelog")
    latest: dict[bytes, bytes] = {}
    records = []
    for i in range(300):
        key, value = f"k{i % 29}".encode(), str(i).encode()
        records.append((key, value))
        latest[key] = value
    produce(kafka_bootstrap, changelog, records)
    root = str(tmp_path / "snapshots")
    report = run(spark, JobConfig(bootstrap, [app_id], root, keep=1, kafka_config=settings))
    assert report["summary"]["records_read"] == 300, report["summary"]
    assert _snapshots(root, app_id, partitions=2) == latest


def test_a_recreated_changelogs_snapshots_are_refused_and_removed_with_what_crashed_runs_left(  # noqa: PLR0917 (fixtures)
    spark: Any,
    kafka_bootstrap: str,
    kafka_admin: Any,
    new_topic: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
) -> None:
    """Issue 46: the manifest records the changelog's topic id. After the changelog is deleted
    and recreated (and has grown past the old snapshots' ends, so offsets cannot tell), the
    job neither builds on the old snapshots nor keeps them; it also removes an unfinished
    snapshot, a crashed run's staging folder and reports beyond the newest ten."""
    from baton.clients.topic_ids import topic_ids
    from baton.compactor import retention
    from baton.compactor.job import REPORT_DIR, STAGING_DIR

    app = unique_name
    config = {"cleanup.policy": "compact"}
    changelog = new_topic(2, name=f"{app}-{STORE}-changelog", config=config)
    produce(kafka_bootstrap, changelog, [(b"old%d" % i, b"1") for i in range(40)])
    root = tmp_path / "snapshots"
    first = run(spark, JobConfig(kafka_bootstrap, [app], str(root)))
    assert first["summary"]["snapshots_written"] == 2
    old_id = topic_ids(kafka_admin, [changelog])[changelog]
    assert {s.topic_id for p in range(2) for s in snapshot.snapshots(str(root), app, STORE, p)} == {old_id}

    unfinished = Path(snapshot.partition_dir(str(root), app, STORE, 0)) / snapshot.snapshot_name(3)
    unfinished.mkdir()
    (unfinished / "part-0.parquet").write_bytes(b"half")
    now = datetime.now(UTC)
    staging = root / STAGING_DIR
    for name in ("20200101T000000Z-dead", "0123abcd", retention.staging_name(now, "5eed")):
        (staging / name).mkdir(parents=True)
    reports = root / app / REPORT_DIR
    for i in range(12):
        (reports / f"report-20200101T0000{i:02d}+0000.json").write_text("{}")

    kafka_admin.delete_topics([changelog])[changelog].result(30)

    def recreated() -> bool:
        try:
            new_topic(2, name=changelog, config=config)
        except KafkaException:
            return False  # still being deleted
        return True

    wait_for("the changelog to be created again", recreated, 60, every=0.5)
    produce(kafka_bootstrap, changelog, [(b"new%d" % i, b"2") for i in range(200)])
    new_id = topic_ids(kafka_admin, [changelog])[changelog]
    assert new_id != old_id

    second = run(spark, JobConfig(kafka_bootstrap, [app], str(root)))
    for part in second["partitions"]:
        assert part["base"] is None and part["read_from"] == part["start_offset"], part
        assert "another incarnation of the changelog" in part["plan"], part["plan"]
        assert f"topic id {old_id}" in part["plan"] and "deleted and recreated" in part["plan"]
    content: dict[bytes, bytes] = {}
    for p in range(2):
        kept = snapshot.snapshots(str(root), app, STORE, p)
        assert [s.topic_id for s in kept] == [new_id], "the old incarnation's snapshots are removed"
        content.update(snapshot.read(kept[0]))
    assert content == {b"new%d" % i: b"2" for i in range(200)}
    assert not unfinished.exists()
    assert sorted(x.name for x in staging.iterdir()) == [retention.staging_name(now, "5eed")]
    assert len(list(reports.glob("report-*.json"))) == retention.REPORTS_KEPT


def test_the_image_puts_only_the_jars_spark_lacks_first_on_the_class_path() -> None:
    """The compactor image prepends the connector's and S3A's jars to Spark's class path
    (spark-defaults.conf): a dependency pyspark already ships, in another version (an older
    scala-library, slf4j-api 1.x, which silenced Spark's logging on the first try), would
    shadow Spark's own. The Dockerfile keeps the connector's artifacts that pyspark lacks,
    which must be exactly what Maven resolves beyond pyspark's jars, and S3A's all are new."""
    import re

    import pyspark

    def artifact(jar: Path) -> str:
        return re.sub(r"-\d[^-]*(-\d+)?(\.Final)?\.jar$", "", jar.name)

    shipped = {artifact(j) for j in (Path(pyspark.__file__).parent / "jars").glob("*.jar")}
    connector = {artifact(Path(j)) for j in spark_jars.jars()}
    dockerfile = (REPO / "Dockerfile").read_text()
    listed = re.search(r"-DincludeArtifactIds=([\w.,-]+)", dockerfile)
    assert listed is not None
    assert set(listed.group(1).split(",")) == connector - shipped, sorted(connector & shipped)
    s3a = {artifact(j) for j in spark_jars.s3a_install().glob("*.jar")}
    assert not s3a & shipped, sorted(s3a & shipped)
