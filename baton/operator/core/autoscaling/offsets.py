"""The operator's own sample: two readings of a consumer group's offsets, as a :class:`.Sample`.

Each pass reads, per partition the active color's group has committed, the committed offset
and the end offset (the reads that ``status.lag`` already makes). Two readings of the same
group give, per partition, the input rate (end offsets over time), the processed rate
(committed offsets over time) and the lag. Offsets carry no busy fraction or CPU: the Pods'
samples say only what they processed together, and the decision works from the processed
rate (see :func:`.sample.measure`: tasks over their lag target count the Pods as fully busy).

A "task" here is one input partition: the operator does not know the topology's
sub-topologies. :func:`task_count` estimates the tasks for the bounds' ceiling: the
partition numbers of the app's source topics (co-partitioned topics share a task) plus the
partitions of each repartition topic (a sub-topology of its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from .sample import PodSample, Sample, TaskSample

# (topic, partition) -> (committed offset, end offset)
Offsets = Mapping[tuple[str, int], tuple[int, int]]


@dataclass(frozen=True)
class OffsetsReading:
    at: float
    group: str  # the application id (with its generation) the offsets are of
    offsets: Offsets


def sample_from_offsets(previous: OffsetsReading | None, current: OffsetsReading, pods: int) -> Sample | None:
    """The sample between two readings of one group; None without a comparable earlier one."""
    if previous is None or previous.group != current.group or current.at - previous.at <= 0:
        return None
    dt = current.at - previous.at
    tasks = []
    for (topic, partition), (committed, end) in sorted(current.offsets.items()):
        before = previous.offsets.get((topic, partition))
        if before is None:
            continue
        tasks.append(
            TaskSample(
                f"{topic}[{partition}]",
                max(0, end - committed),
                max(0, end - before[1]) / dt,
                max(0, committed - before[0]) / dt,
            )
        )
    if not tasks:
        return None
    processed = sum(t.processed_rate for t in tasks)
    n = max(1, pods)
    # the group's processed rate, evenly over the Pods (no per-Pod figure from offsets)
    return Sample(current.at, tuple(tasks), tuple(PodSample(f"pod-{i}", processed / n) for i in range(n)))


def task_count(offsets: Offsets, application_id: str) -> int:
    """Tasks, estimated from the partitions a group commits (0: unknown)."""
    sources: set[int] = set()
    repartitions: dict[str, set[int]] = {}
    for topic, partition in offsets:
        if topic.startswith(f"{application_id}-") and topic.endswith("-repartition"):
            repartitions.setdefault(topic, set()).add(partition)
        else:
            sources.add(partition)
    return len(sources) + sum(len(p) for p in repartitions.values())
