"""Compaction throughput, incremental runs, and restore time with and without a snapshot.

    python bench/compaction.py [--bootstrap 127.0.0.1:29092] [--keys 10000000] [--updates 1]
                               [--more 1000000] [--partitions 12] [--changed 0.01]
                               [--json bench/compaction.json]

A changelog of ``keys x updates`` records (``partitions`` partitions, key ``i`` in partition
``i mod partitions``, as a worker writes it: key, value bytes) is snapshotted by a first
run. Then ``more`` records (new values of the first ``more`` keys) are produced and a
second run builds on the first snapshot: it reads only those. Then a ``changed`` fraction
of all keys gets new values, all in partition 0, as when one hot partition moves and the
rest stand still: the third run reads and rewrites that partition only (the others are
``unchanged``). For comparison, a run into an empty store reads the same changelog whole.
Then ``more`` records again, and the restores: without a snapshot a restore replays every
record; with one it loads ``keys`` pairs and replays only the last ``more``. Restores use
the worker's own restore thread (``baton.worker.state.restore.Restorer``) into RocksDB stores,
the path a worker takes.

Compaction throughput is changelog records read per second of the job (Spark session
start excluded; it is reported separately). PySpark runs in local mode on this machine's
cores with the spark-sql-kafka jars of ``batondev.spark``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from baton.clients.topic_ids import topic_ids
from baton.worker.naming import TaskId, changelog_topic
from baton.worker.runtime.internal_topics import CHANGELOG_CONFIG, topic_settings
from baton.worker.state import snapshot
from baton.worker.state.restore import RestoreJob, Restorer, TaskRestore
from baton.worker.state.stores import RocksDBStore

STORE = "counts"


def produce_round(bootstrap: str, topic: str, keys: range, round_: int, partitions: int) -> None:
    """A new value of each key in ``keys``; key ``i`` always goes to partition ``i mod partitions``."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 50,
            "batch.size": 1 << 20,
            "compression.type": "lz4",
        }
    )
    for i in keys:
        key = b"user-%08d" % i
        while True:
            try:
                producer.produce(topic, b"%d-%d" % (round_, i), key, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def restore(  # noqa: PLR0917
    bootstrap: str, app: str, topic: str, state: Path, store_uri: str | None, partitions: int
) -> dict[str, float]:
    """Restore every partition into fresh RocksDB stores; seconds and changelog records replayed."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    seed = (
        snapshot.seeder(
            store_uri,
            app,
            lambda s: changelog_topic(app, s),
            lambda t: int(topic_settings(admin, t)["delete.retention.ms"]),
            topic_id=lambda t: topic_ids(admin, [t])[t],
        )
        if store_uri
        else None
    )
    restorer = Restorer(
        {"bootstrap.servers": bootstrap, "group.id": f"bench-restore-{uuid.uuid4().hex}"}, seed=seed
    )
    done = threading.Event()
    stores = [RocksDBStore(state / str(p) / STORE) for p in range(partitions)]
    jobs = [RestoreJob(TaskId(0, p), STORE, topic, p, stores[p]) for p in range(partitions)]
    waiting = set(range(partitions))

    def ready(task: TaskRestore) -> None:  # one task per partition, as a worker has them
        waiting.discard(task.task.partition)
        if not waiting:
            done.set()

    started = time.monotonic()
    restorer.start()
    for job in jobs:
        restorer.add(TaskRestore(job.task, [job], ready))
    if not done.wait(1800):
        raise TimeoutError("restore did not finish")
    seconds = time.monotonic() - started
    restorer.stop()
    restorer.join(10)
    keys = sum(1 for s in stores for _ in s.items())
    for s in stores:
        s.close()
    return {"seconds": round(seconds, 2), "replayed": sum(j.restored for j in jobs), "keys": keys}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default=os.environ.get("BATON_KAFKA_BOOTSTRAP", "127.0.0.1:29092"))
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--updates", type=int, default=1)
    parser.add_argument("--more", type=int, default=1_000_000, help="records between the runs")
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument(
        "--changed", type=float, default=0.01, help="fraction of all keys changed in partition 0 alone"
    )
    parser.add_argument(
        "--cleaner",
        choices=["on", "off"],
        default="on",
        help="off: min.compaction.lag.ms of a day keeps the broker's log cleaner away from the changelog, "
        "like a changelog whose segments are not yet cleanable (Kafka's default segment.ms is 7 days)",
    )
    parser.add_argument(
        "--master",
        default="local[2]",
        help="local[N], or spark://... (the stack's cluster: spark://127.0.0.1:29120)",
    )
    parser.add_argument("--json", type=Path, default=Path(__file__).with_name("compaction.json"))
    args = parser.parse_args()

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))
    from batondev import spark as spark_jars

    from baton.compactor.job import JobConfig, run
    from baton.compactor.session import session

    app = f"bench-compact-{uuid.uuid4().hex[:6]}"
    topic = changelog_topic(app, STORE)
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    config = dict(CHANGELOG_CONFIG)
    if args.cleaner == "off":
        config["min.compaction.lag.ms"] = str(86_400_000)
    admin.create_topics([NewTopic(topic, args.partitions, 1, config=config)])[topic].result(30)
    work = Path(tempfile.mkdtemp(prefix="baton-bench-compact-"))
    results: dict[str, Any] = {
        "keys": args.keys,
        "updates": args.updates,
        "more": args.more,
        "cleaner": args.cleaner,
        "partitions": args.partitions,
        "changed": args.changed,
        "master": args.master,
        "cpus": os.cpu_count(),
    }
    try:
        started = time.monotonic()
        for round_ in range(args.updates):
            produce_round(args.bootstrap, topic, range(args.keys), round_, args.partitions)
        results["produce_seconds"] = round(time.monotonic() - started, 2)

        started = time.monotonic()
        if args.master.startswith("spark://"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the stack's cluster listens there
            if args.master == spark_jars.master_url():
                spark_jars.cluster_up()
        spark = session(args.master, spark_jars.jars(), app_name="baton-bench-compaction")
        results["spark_start_seconds"] = round(time.monotonic() - started, 2)
        store_uri = str(work / "snapshots")

        def compact(root: str) -> dict[str, Any]:
            started = time.monotonic()
            report = run(spark, JobConfig(args.bootstrap, [app], root))
            seconds = time.monotonic() - started
            read = report["summary"]["records_read"]
            return {
                "records_read": read,
                "live_keys": report["summary"]["live_keys"],
                "snapshots_written": report["summary"]["snapshots_written"],
                "partitions_read": sorted(
                    p["partition"] for p in report["partitions"] if p["plan"] != "unchanged"
                ),
                "plans": sorted({p["plan"] for p in report["partitions"]}),
                "seconds": round(seconds, 2),
                "records_per_second": round(read / seconds),
                "timings": report["timings"],
            }

        results["compaction"] = compact(store_uri)
        produce_round(args.bootstrap, topic, range(args.more), args.updates, args.partitions)
        results["incremental"] = compact(store_uri)
        changed = range(
            0, int(args.keys * args.changed) * args.partitions, args.partitions
        )  # all in partition 0
        produce_round(args.bootstrap, topic, changed, args.updates + 1, args.partitions)
        results["one_partition_changed"] = compact(store_uri)
        results["full_reread"] = compact(str(work / "from-scratch"))
        spark.stop()
        produce_round(args.bootstrap, topic, range(args.more), args.updates + 2, args.partitions)

        results["restore_without_snapshot"] = restore(
            args.bootstrap, app, topic, work / "plain", None, args.partitions
        )
        results["restore_with_snapshot"] = restore(
            args.bootstrap, app, topic, work / "seeded", store_uri, args.partitions
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
        admin.delete_topics([topic])[topic].result(30)

    c, inc, one, whole, plain, seeded = (
        results["compaction"],
        results["incremental"],
        results["one_partition_changed"],
        results["full_reread"],
        results["restore_without_snapshot"],
        results["restore_with_snapshot"],
    )
    rows = [
        (
            "changelog records",
            f"{args.keys * args.updates:,} ({args.keys:,} keys x {args.updates}), log cleaner {args.cleaner}",
        ),
        ("first run: records read", f"{c['records_read']:,} in {c['seconds']} s"),
        ("first run throughput", f"{c['records_per_second']:,} records/s"),
        (
            f"incremental run after {args.more:,} more",
            f"{inc['records_read']:,} read + {c['live_keys']:,} snapshot rows in {inc['seconds']} s",
        ),
        (
            f"{args.changed:.0%} of keys changed in 1 of {args.partitions} partitions",
            f"{one['records_read']:,} read, partitions {one['partitions_read']} read and "
            f"{one['snapshots_written']} snapshot written in {one['seconds']} s",
        ),
        ("same changelog read whole", f"{whole['records_read']:,} read in {whole['seconds']} s"),
        (
            "one partition's run against the whole read",
            f"{one['seconds'] / whole['seconds']:.1%} of the time",
        ),
        ("spark session start", f"{results['spark_start_seconds']} s"),
        ("restore without snapshot", f"{plain['seconds']} s, {plain['replayed']:,} records replayed"),
        (
            "restore with snapshot",
            f"{seeded['seconds']} s, {args.keys:,} keys loaded + {seeded['replayed']:,} records replayed",
        ),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"| {'':{width}} | |\n|{'-' * (width + 2)}|---|")
    for name, value in rows:
        print(f"| {name:{width}} | {value} |")
    assert plain["keys"] == seeded["keys"] == args.keys
    assert inc["records_read"] == args.more and inc["plans"] == ["incremental"], inc
    assert one["partitions_read"] == [0] and one["snapshots_written"] == 1, one
    assert one["records_read"] == len(changed), one
    # the log cleaner may have compacted the changelog in between: a whole read gets what is left
    assert whole["records_read"] <= args.keys * args.updates + args.more + len(changed), whole
    args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
