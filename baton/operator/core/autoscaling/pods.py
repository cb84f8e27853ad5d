"""The workers' own figures: two readings of a Pod's ``/metrics``, as a :class:`.PodSample`.

The offsets (:mod:`.offsets`) tell what the group processed together, not how busy the Pods
were doing it, so Pods that keep up give no decision from them. Each worker counts
``baton_busy_seconds_total`` (seconds its processing loop worked rather than waited in
poll), ``baton_records_consumed_total`` and the ``baton_e2e_latency_seconds`` histogram;
the operator scrapes each Ready Pod of the active color every pass (``baton.operator.pod_metrics``,
the I/O) and keeps the previous reading. Between two readings of one Pod:

* busy fraction = increase of busy seconds / elapsed seconds / processes of the Pod (0..1),
* processed rate = increase of records consumed / elapsed seconds,
* p99 = the 0.99 quantile of the increase of the latency histogram's buckets, interpolated
  in a bucket as Prometheus' ``histogram_quantile`` does.

Increases are Prometheus' ``increase`` without extrapolation, per series: a series that went
down was reset (a process restarted), so its increase is its value; a series new since the
previous reading counts whole; a series gone (a task revoked) counts nothing. A Pod whose UID
changed (recreated under the same name) or whose process count changed has no sample until
the next pass. Nothing here reads a clock or the network.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

from .sample import PodSample, Sample

P99 = 0.99


@dataclass(frozen=True)
class PodReading:
    """One scrape of one Pod, reduced to the series the autoscaler uses.

    Keys identify a series within the Pod (its labels other than ``le``, the ``process``
    label of a multi-process Pod included)."""

    pod: str
    uid: str
    at: float  # seconds, the operator's clock at the scrape
    busy_seconds: Mapping[str, float]  # per process ("" for a single-process Pod)
    consumed: Mapping[str, float]  # records, per series (process, topic, partition)
    latency_buckets: Mapping[tuple[str, float], float]  # (series, le) -> cumulative count

    @property
    def processes(self) -> int:
        return max(1, len(self.busy_seconds))


def increase(previous: Mapping[str, float], current: Mapping[str, float]) -> float:
    """Summed increase of the series of ``current`` since ``previous`` (resets counted as such)."""
    total = 0.0
    for key, value in current.items():
        before = previous.get(key, 0.0)
        total += value - before if value >= before else value
    return total


def quantile(q: float, buckets: Mapping[float, float]) -> float | None:
    """The ``q`` quantile of a cumulative histogram (``le`` -> count), as ``histogram_quantile``:
    linear within the bucket it falls in; in the ``+Inf`` bucket, the highest finite bound.
    None without observations."""
    bounds = sorted(buckets)
    if not bounds or bounds[-1] != math.inf:
        return None
    total = buckets[math.inf]
    if total <= 0:
        return None
    rank = q * total
    lower, below = 0.0, 0.0
    for le in bounds:
        count = max(below, buckets[le])  # cumulative: never below the bucket before
        if count >= rank:
            if le == math.inf:
                return lower
            if count <= below:
                return le
            return lower + (le - lower) * (rank - below) / (count - below)
        lower, below = le, count
    return lower


def pod_sample(previous: PodReading | None, current: PodReading) -> PodSample | None:
    """The Pod's sample between two readings; None without a comparable earlier one."""
    if (
        previous is None
        or previous.uid != current.uid
        or previous.processes != current.processes
        or current.at - previous.at <= 0
    ):
        return None
    dt = current.at - previous.at
    busy = None
    if current.busy_seconds:
        busy = min(
            1.0, max(0.0, increase(previous.busy_seconds, current.busy_seconds) / dt / current.processes)
        )
    by_le: dict[float, float] = {}
    for (series, le), value in current.latency_buckets.items():
        before = previous.latency_buckets.get((series, le), 0.0)
        # a series reset drops all its buckets at once: each bucket's increase is its value
        by_le[le] = by_le.get(le, 0.0) + (value - before if value >= before else value)
    return PodSample(
        current.pod,
        increase(previous.consumed, current.consumed) / dt,
        busy=busy,
        latency_p99_seconds=quantile(P99, by_le),
    )


def pod_samples(
    previous: Mapping[str, PodReading], current: Mapping[str, PodReading]
) -> tuple[PodSample, ...] | None:
    """Every Pod's sample, by name; None unless each Pod of ``current`` has one."""
    out = []
    for name in sorted(current):
        sample = pod_sample(previous.get(name), current[name])
        if sample is None:
            return None
        out.append(sample)
    return tuple(out) if out else None


def with_pods(sample: Sample | None, pods: tuple[PodSample, ...] | None) -> Sample | None:
    """The offsets' sample (tasks: input rate and lag) with the Pods' own figures in place of
    its even split of the processed rate; unchanged without them. The Pods alone make no
    sample: without the offsets there is no input rate to size for."""
    if sample is None or not pods:
        return sample
    return replace(sample, pods=pods)
