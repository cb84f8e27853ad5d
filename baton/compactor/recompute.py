"""Batch recomputation of a topology's stores from its input topics, to audit the stores against.

Each changelog partition is recomputed by running the topology's own processors (a
worker ``Task`` with in-memory stores) over the input partition's records up to the
position the app has committed, inside a Spark job. The result is what the store must hold
at that input position, computed independently of the changelog, so a changelog record
that does not follow from the input shows up.

The input reaches the Python workers as a stream, sorted by Spark (input partition, then
the order the worker reads it in), and each input partition is replayed as its rows go
by: a Python worker holds the stores it rebuilds, never an input partition.

Incremental: a run keeps what it recomputed (the stores and each task's stream time, as
rows of the same frame) with the input positions it reflects, a *baseline* under
``<store>/<app>/_recompute/<sub-topology>/``. The next run seeds the tasks from the
baseline and replays only the input after it (:func:`replay_ranges`), so an audit costs
what the input grew by. A baseline is not used when an input topic was recreated (its
topic id differs) or the app's position went back (a reset). Without a usable baseline the
input is needed from its first offset; when the topic's retention has removed records the
replay would need, :func:`replay_ranges` says so and the audit reports that sub-topology as
not compared rather than as divergent.

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


@dataclass(frozen=True)
class Baseline:
    """What an earlier run recomputed: where it is (``state``) and the input it reflects."""

    state: str  # the folder of its rows, under the sub-topology's folder
    positions: dict[tuple[str, int], int]
    topic_ids: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        return {
            "format": BASELINE_FORMAT,
            "state": self.state,
            "positions": [[t, p, o] for (t, p), o in sorted(self.positions.items())],
            "topic_ids": self.topic_ids,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Baseline | None:
        if data.get("format") != BASELINE_FORMAT:
            return None
        return cls(
            str(data["state"]),
            {(str(t), int(p)): int(o) for t, p, o in data.get("positions", [])},
            {str(k): str(v) for k, v in (data.get("topic_ids") or {}).items()},
        )


BASELINE_FORMAT = 1
STREAM_TIME = ""  # the topic column of a row that carries a task's stream time (value: its digits)


@dataclass(frozen=True)
class Replay:
    """What a run replays for one plan: per input topic, partition -> [start, end) offsets."""

    ranges: dict[str, dict[int, tuple[int, int]]]
    baseline: Baseline | None  # seeded from it; None: from the input's start
    why_not_baseline: str  # empty when a baseline is used or there is none
    gap: str  # empty unless retention removed records the replay needs

    @property
    def offsets(self) -> int:
        return sum(end - start for parts in self.ranges.values() for start, end in parts.values())


def replay_ranges(
    plan: Plan,
    positions: Mapping[tuple[str, int], int],
    lows: Mapping[tuple[str, int], int],
    topic_ids: Mapping[str, str],
    baseline: Baseline | None,
) -> Replay:
    """The input a recomputation must replay, from a baseline when one is usable (pure).

    ``positions`` are what the app has committed (the recomputation's end), ``lows`` the
    input partitions' first offsets now, ``topic_ids`` the ids of the input topics that exist.
    """
    mine = {k: o for k, o in positions.items() if k[0] in plan.topics}
    read = sorted(
        {t for t, _p in mine}
    )  # the plan's topics the app has read (topology settings may name others)
    missing = [t for t in read if t not in topic_ids]
    if missing:
        gap = f"sub-topology {plan.subtopology}: the input topic is gone ({', '.join(missing)}), so the stores cannot be recomputed"
        return Replay({}, None, "", gap)
    why = ""
    if baseline is not None:
        recreated = [t for t in read if baseline.topic_ids.get(t) != topic_ids[t]]
        behind = sorted(f"{t}-{p}" for (t, p), o in baseline.positions.items() if o > mine.get((t, p), 0))
        if recreated:
            why = f"input topic recreated since the last audit: {', '.join(recreated)}"
        elif behind:
            why = f"the app's position went back since the last audit: {', '.join(behind)}"
        if why:
            baseline = None
    start = baseline.positions if baseline is not None else {}
    ranges: dict[str, dict[int, tuple[int, int]]] = {t: {} for t in plan.topics}
    for (topic, partition), end in sorted(mine.items()):
        ranges[topic][partition] = (start.get((topic, partition), 0), end)
    gone = sorted(
        f"{topic}-{partition} below offset {lows[(topic, partition)]}"
        for topic, parts in ranges.items()
        for partition, (first, end) in parts.items()
        if end > first and lows.get((topic, partition), 0) > first
    )
    gap = ""
    if gone:
        gap = (
            f"sub-topology {plan.subtopology}: the input's retention removed records ({', '.join(gone)}) "
            + (
                "after the last audited position"
                if baseline is not None
                else "and no earlier audit's recomputation can stand in, so the stores cannot be recomputed from the start"
            )
        )
    return Replay(ranges, baseline, why, gap)


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
    store_of = {changelog_topic(application_id, name): name for name in plan.stores}
    seeds: dict[str, list[tuple[bytes, bytes | None]]] = {name: [] for name in plan.stores}
    n = 0
    for row in rows:  # the baseline's rows first, then the input in read order: Spark sorted them
        if row["phase"] == SEED:
            if row["topic"] == STREAM_TIME:
                task.resume_stream_time(bytes(row["value"]).decode())
            elif row["topic"] in store_of:
                seeds[store_of[row["topic"]]].append((bytes(row["key"]), bytes(row["value"])))
            continue
        if seeds:
            for name, items in seeds.items():
                stores[name].write(items, None)
            seeds = {}
        task.process(Record(row["topic"], partition, row["offset"], row["ts"], row["key"], row["value"]))
        n += 1
        if n % 10_000 == 0:
            task.flush()
            task.committed_ok({})
    for name, items in seeds.items():  # a partition with no new input: the baseline as it was
        stores[name].write(items, None)
    task.flush()
    task.committed_ok({})
    for name in plan.stores:
        topic = changelog_topic(application_id, name)
        for key, value in stores[name].items():
            yield topic, partition, key, value
    stream_time = task.commit_metadata()
    if stream_time:
        yield STREAM_TIME, partition, b"", stream_time.encode()


def recompute(spark: Any, inputs: Any, seeds: Any, *, target: str, application_id: str, plan: Plan) -> Any:
    """A DataFrame (topic, partition, key, value) of what the plan's stores must hold, and a
    row per task with its stream time (topic :data:`STREAM_TIME`).

    ``inputs``: the input records to replay (``frames.read_kafka``'s columns) or None;
    ``seeds``: a baseline's rows (this function's own columns) or None."""
    from pyspark.sql import functions as F  # noqa: N812
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
    parts = []
    if seeds is not None:
        parts.append(
            seeds.select(
                "topic",
                "partition",
                F.lit(-1).cast("long").alias("offset"),
                "key",
                "value",
                F.lit(None).cast("long").alias("ts"),
                F.lit(SEED).alias("phase"),
            )
        )
    if inputs is not None:
        parts.append(inputs.where(inputs.topic.isin(plan.topics)).withColumn("phase", F.lit(INPUT)))
    rows = parts[0]
    for part in parts[1:]:
        rows = rows.unionByName(part)
    ordered = rows.repartition("partition").sortWithinPartitions("partition", "phase", *order_columns(plan))
    return spark.createDataFrame(ordered.rdd.mapPartitions(replay(target, application_id, plan, env)), schema)


SEED, INPUT = 0, 1  # the order a partition's rows reach the replay in: the baseline, then the input


_SPARK_OWNED = ("SPARK_", "PYSPARK_", "PYTHON", "JAVA_", "HADOOP_", "PATH", "HOME", "PWD", "TMP")
