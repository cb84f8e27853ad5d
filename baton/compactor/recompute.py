"""Batch recomputation of a topology's stores from its input topics, to audit the stores against.

Each changelog partition is recomputed by running the topology's own processors (a
worker ``Task`` with in-memory stores) over the input partition's records up to the
position the app has committed, inside a Spark job. The result is what the store must hold
at that input position, computed independently of the changelog, so a changelog record
that does not follow from the input shows up.

The input reaches the Python workers as a stream, sorted by Spark (input partition, then
the order the worker reads it in), and each input partition is replayed as its rows go
by: a Python worker holds the stores it rebuilds, never an input partition. A
recomputation needs the input from its first offset; when the topic's retention has
removed the start (its low watermark is above 0), :func:`retention_gaps` says so and the
audit reports that sub-topology as not compared rather than as divergent.

Supported: sub-topologies whose sources are external topics (count, reduce, aggregate
after ``group_by_key``, windowed or not) without table joins. A repartition step or a
table makes the result depend on the interleaving between topics, which a batch cannot
reproduce; those sub-topologies are skipped and the report says so.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from baton.worker.topology.graph import BuiltTopology


@dataclass(frozen=True)
class Plan:
    subtopology: int
    topics: list[str]  # external input topics
    stores: list[str]


def plans(topology: BuiltTopology) -> tuple[list[Plan], list[str]]:
    """Sub-topologies that can be recomputed, and why the others cannot (pure)."""
    out, skipped = [], []
    for sub in topology.subtopologies:
        if not sub.stores:
            continue
        if any(s.internal for s in sub.sources):
            skipped.append(f"sub-topology {sub.index} reads a repartition topic")
        elif sub.tables:
            skipped.append(f"sub-topology {sub.index} joins a table")
        else:
            out.append(Plan(sub.index, sorted(sub.source_topics), [s.name for s in sub.stores]))
    return out, skipped


def retention_gaps(
    plan: Plan, lows: Mapping[tuple[str, int], int], positions: Mapping[tuple[str, int], int]
) -> str:
    """Why the plan's input cannot be replayed from its start (empty: it can). Pure.

    ``lows`` are the input partitions' first offsets now, ``positions`` what the app has
    committed. A partition whose records below its low watermark were removed (retention,
    ``deleteRecords``) while the app had read past them cannot be recomputed from scratch.
    """
    gone = sorted(
        f"{topic}-{partition} below offset {low}"
        for (topic, partition), low in lows.items()
        if topic in plan.topics and low > 0 and positions.get((topic, partition), 0) > 0
    )
    if not gone:
        return ""
    return (
        f"sub-topology {plan.subtopology}: the input's retention removed records ({', '.join(gone)}), "
        "so the stores cannot be recomputed from the start"
    )


def order_columns(plan: Plan) -> list[str]:
    """The order a worker reads one input partition in: offsets for one topic; for several,
    record time is the best batch guess."""
    return ["offset"] if len(plan.topics) == 1 else ["ts", "topic", "offset"]


def replay(
    target: str, application_id: str, plan: Plan, env: dict[str, str]
) -> Callable[[Iterable[Any]], Iterator[tuple[str, int, bytes, bytes]]]:
    """A function for ``rdd.mapPartitions``: input rows sorted by (partition, read order) ->
    (changelog topic, partition, key, value) of each input partition's stores, streamed.

    ``env`` is the driver's environment: topologies read settings such as topic names from
    it (the example does), and executors elsewhere in a cluster do not have it.
    """

    def run(rows: Iterable[Any]) -> Iterator[tuple[str, int, bytes, bytes]]:
        import os

        os.environ.update(env)
        for partition, group in itertools.groupby(rows, key=lambda r: int(r["partition"])):
            yield from _one_partition(target, application_id, plan, partition, group)

    return run


def _one_partition(
    target: str, application_id: str, plan: Plan, partition: int, rows: Iterable[Any]
) -> Iterator[tuple[str, int, bytes, bytes]]:
    from baton.worker.naming import TaskId, changelog_topic
    from baton.worker.runtime.record import Record
    from baton.worker.runtime.task import Task
    from baton.worker.state.stores import KeyValueStore, MemoryStore
    from baton.worker.topology.context import OpenGate
    from baton.worker.topology.loader import load

    sub = load(target).subtopologies[plan.subtopology]
    stores: dict[str, KeyValueStore] = {name: MemoryStore() for name in plan.stores}

    def drop(*_args: Any) -> None:  # sink records and dead letters: the stores are what counts
        return None

    task = Task(
        TaskId(plan.subtopology, partition),
        sub,
        application_id=application_id,
        stores=stores,
        send=drop,  # type: ignore[arg-type]
        gate=OpenGate(),
        caching=False,
        dead_letter=drop,
    )
    for n, row in enumerate(rows):  # in read order: Spark sorted them
        task.process(Record(row["topic"], partition, row["offset"], row["ts"], row["key"], row["value"]))
        if n % 10_000 == 9_999:
            task.flush()
            task.committed_ok({})
    task.flush()
    task.committed_ok({})
    for name in plan.stores:
        topic = changelog_topic(application_id, name)
        for key, value in stores[name].items():
            yield topic, partition, key, value


def recompute(spark: Any, inputs: Any, target: str, application_id: str, plan: Plan) -> Any:
    """A DataFrame (topic, partition, key, value) of what the plan's stores must hold."""
    from pyspark.sql.types import BinaryType, IntegerType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
        ]
    )
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(_SPARK_OWNED)}
    ordered = (
        inputs.where(inputs.topic.isin(plan.topics))
        .repartition("partition")
        .sortWithinPartitions("partition", *order_columns(plan))
    )
    return spark.createDataFrame(ordered.rdd.mapPartitions(replay(target, application_id, plan, env)), schema)


_SPARK_OWNED = ("SPARK_", "PYSPARK_", "PYTHON", "JAVA_", "HADOOP_", "PATH", "HOME", "PWD", "TMP")
