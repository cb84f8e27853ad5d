"""PySpark in local mode reads a Kafka topic through the spark-sql-kafka connector."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from batondev import spark
from confluent_kafka import Producer

pytestmark = pytest.mark.integration


def test_pyspark_reads_kafka_topic(kafka_bootstrap: str, new_topic: Callable[..., str]) -> None:
    from pyspark.sql import SparkSession

    topic = new_topic(partitions=3)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(300):
        producer.produce(topic, key=f"user-{i % 7}".encode(), value=str(i).encode(), partition=i % 3)
    assert producer.flush(30) == 0

    session = (
        SparkSession.builder.master("local[1]")
        .appName("baton-smoke")
        .config("spark.jars", ",".join(spark.jars()))
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    try:
        frame = (
            session.read.format("kafka")
            .option("kafka.bootstrap.servers", kafka_bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", "earliest")
            .option("endingOffsets", "latest")
            .load()
        )
        rows = frame.selectExpr("partition", "CAST(value AS STRING) AS v").collect()
    finally:
        session.stop()
    assert len(rows) == 300
    assert sorted(int(r["v"]) for r in rows) == list(range(300))
    assert {r["partition"] for r in rows} == {0, 1, 2}
