"""Reading changelogs with Spark's Kafka source, and the latest value per key at scale.

Same rule as ``latest.py`` (highest offset wins, a null value deletes), computed with one
aggregation per (topic, partition, key): the max of ``struct(offset, value)`` picks the
value of the highest offset, tombstone or not, and per-partition statistics come from the
same aggregation. Rows of an earlier snapshot (an incremental run's base) join the
changelog records with offset -1, below any record, and are not counted as records read.
"""

from __future__ import annotations

import json
from typing import Any

from baton.compactor.latest import PartitionStats


def diff(expected: Any, actual: Any) -> tuple[dict[str, int], list[Any]]:
    """Full outer join on (topic, partition, key): counts of missing/unexpected/different, and a few rows."""
    from pyspark.sql import functions as F  # noqa: N812

    joined = expected.withColumnRenamed("value", "expected").join(
        actual.withColumnRenamed("value", "actual"), ["topic", "partition", "key"], "full_outer"
    )
    differs = joined.where(~F.col("expected").eqNullSafe(F.col("actual"))).cache()
    counts = differs.agg(
        F.count(F.lit(1)).alias("total"),
        F.sum(F.when(F.col("actual").isNull(), 1).otherwise(0)).alias("missing"),
        F.sum(F.when(F.col("expected").isNull(), 1).otherwise(0)).alias("unexpected"),
    ).collect()[0]
    compared = joined.count()
    total = int(counts["total"])
    missing, unexpected = int(counts["missing"] or 0), int(counts["unexpected"] or 0)
    samples = differs.orderBy("topic", "partition", "key").limit(10).collect()
    differs.unpersist()
    return (
        {
            "compared": compared,
            "missing": missing,
            "unexpected": unexpected,
            "different": total - missing - unexpected,
        },
        samples,
    )


def read_kafka(
    spark: Any,
    bootstrap: str,
    ranges: dict[str, dict[int, tuple[int, int]]],
    options: dict[str, str] | None = None,
) -> Any:
    """Records of each topic partition in [start, end): columns topic, partition, offset, key, value.

    ``read_committed`` skips aborted transactions; ``failOnDataLoss`` is off because offset
    gaps are normal in changelogs (compaction removes records, transaction markers take offsets).
    """
    topics = {t: {str(p): r for p, r in parts.items() if r[1] > r[0]} for t, parts in ranges.items()}
    topics = {t: parts for t, parts in topics.items() if parts}
    if not topics:
        return None
    reader = (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("kafka.isolation.level", "read_committed")
        .option("failOnDataLoss", "false")
        .option("assign", json.dumps({t: [int(p) for p in parts] for t, parts in topics.items()}))
        .option(
            "startingOffsets",
            json.dumps({t: {p: r[0] for p, r in parts.items()} for t, parts in topics.items()}),
        )
        .option(
            "endingOffsets",
            json.dumps({t: {p: r[1] for p, r in parts.items()} for t, parts in topics.items()}),
        )
    )
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    from pyspark.sql import functions as F  # noqa: N812

    return reader.load().select(
        "topic", "partition", "offset", "key", "value", F.unix_millis("timestamp").alias("ts")
    )


BASE_OFFSET = -1


def read_snapshots(spark: Any, bases: dict[tuple[str, int], str]) -> Any:
    """The rows of earlier snapshots, as changelog records at offset -1; None if there are none."""
    from pyspark.sql import functions as F  # noqa: N812

    frames = [
        # an explicit schema: a snapshot of a partition with no live key has no Parquet file
        spark.read.schema("key binary, value binary")
        .parquet(path)
        .select(
            F.lit(topic).alias("topic"),
            F.lit(partition).cast("int").alias("partition"),
            F.lit(BASE_OFFSET).cast("long").alias("offset"),
            "key",
            "value",
            F.lit(None).cast("long").alias("ts"),
        )
        for (topic, partition), path in sorted(bases.items())
    ]
    return union(*frames)


def snapshot_rows(spark: Any, paths: dict[tuple[str, int], str]) -> Any:
    """The content of snapshots as live rows (topic, partition, key, value); None if there are none."""
    rows = read_snapshots(spark, paths)
    return None if rows is None else rows.select("topic", "partition", "key", "value")


def union(*parts: Any) -> Any:
    """Frames of the same columns as one; None if there are none."""
    present = [p for p in parts if p is not None]
    if not present:
        return None
    out = present[0]
    for part in present[1:]:
        out = out.unionByName(part)
    return out


def per_key(records: Any) -> Any:
    """(topic, partition, key) -> last value (null: deleted), and the changelog records read for it.

    ``updates``, ``tombstones`` and ``bytes`` count changelog records only, not base rows.
    """
    from pyspark.sql import functions as F  # noqa: N812

    keyed = records.where(F.col("key").isNotNull())
    read = F.col("offset") > BASE_OFFSET
    size = F.length("key") + F.coalesce(F.length("value"), F.lit(0))
    return keyed.groupBy("topic", "partition", "key").agg(
        F.max(F.struct("offset", "value")).getField("value").alias("value"),
        F.sum(F.when(read, 1).otherwise(0)).alias("updates"),
        F.sum(F.when(read & F.col("value").isNull(), 1).otherwise(0)).alias("tombstones"),
        F.sum(F.when(read, size).otherwise(0)).alias("bytes"),
    )


def live(keys: Any) -> Any:
    """The snapshot content: (topic, partition, key, value) of keys whose last update is not a tombstone."""
    from pyspark.sql import functions as F  # noqa: N812

    return keys.where(F.col("value").isNotNull()).select("topic", "partition", "key", "value")


def stats(keys: Any) -> dict[tuple[str, int], PartitionStats]:
    from pyspark.sql import functions as F  # noqa: N812

    rows = (
        keys.groupBy("topic", "partition")
        .agg(
            F.sum("updates").alias("records"),
            F.sum("tombstones").alias("tombstones"),
            F.sum("bytes").alias("bytes"),
            F.count(F.lit(1)).alias("distinct_keys"),
            F.sum(F.when(F.col("value").isNotNull(), 1).otherwise(0)).alias("live_keys"),
            F.sum(F.when(F.col("value").isNotNull() & (F.col("updates") > 0), 1).otherwise(0)).alias(
                "live_read"
            ),
        )
        .collect()
    )
    return {
        (r["topic"], int(r["partition"])): PartitionStats(
            records=int(r["records"]),
            tombstones=int(r["tombstones"]),
            bytes=int(r["bytes"]),
            distinct_keys=int(r["distinct_keys"]),
            live_keys=int(r["live_keys"]),
            live_read=int(r["live_read"]),
        )
        for r in rows
    }
