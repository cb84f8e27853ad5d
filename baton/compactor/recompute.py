"""Batch recomputation of a topology's stores from its input topics, to audit the stores against.

Each changelog partition is recomputed by running the topology's own processors (a
worker ``Task`` with in-memory stores) over the input partition's records up to the
position the app has committed, inside a Spark job: one Python task per input partition.
The result is what the store must hold at that input position, computed independently
of the changelog, so a changelog record that does not follow from the input shows up.

Supported: sub-topologies whose sources are external topics (count, reduce, aggregate
after ``group_by_key``, windowed or not) without table joins. A repartition step or a
table makes the result depend on the interleaving between topics, which a batch cannot
reproduce; those sub-topologies are skipped and the report says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
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


def replay(
    target: str, application_id: str, plan: Plan, env: dict[str, str]
) -> Callable[[tuple[int, Iterable[Any]]], Iterator[tuple[str, int, bytes, bytes]]]:
    """A function for ``rdd.flatMap``: (partition, input rows) -> (changelog topic, partition, key, value).

    ``env`` is the driver's environment: topologies read settings such as topic names from
    it (the example does), and executors elsewhere in a cluster do not have it.
    """

    def run(item: tuple[int, Iterable[Any]]) -> Iterator[tuple[str, int, bytes, bytes]]:
        import os

        os.environ.update(env)
        from baton.worker.naming import TaskId, changelog_topic
        from baton.worker.runtime.record import Record
        from baton.worker.runtime.task import Task
        from baton.worker.state.stores import KeyValueStore, MemoryStore
        from baton.worker.topology.context import OpenGate
        from baton.worker.topology.loader import load

        partition, rows = item
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
        # one topic: offset order, as the worker reads it; several: record time is the best batch guess
        order = (
            (lambda r: r["offset"])
            if len(plan.topics) == 1
            else (lambda r: (r["ts"], r["topic"], r["offset"]))
        )
        for n, row in enumerate(sorted(rows, key=order)):
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

    return run


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
    by_partition = inputs.where(inputs.topic.isin(plan.topics)).rdd.groupBy(lambda r: r["partition"])
    return spark.createDataFrame(by_partition.flatMap(replay(target, application_id, plan, env)), schema)


_SPARK_OWNED = ("SPARK_", "PYSPARK_", "PYTHON", "JAVA_", "HADOOP_", "PATH", "HOME", "PWD", "TMP")
