"""The Pods' own sample: two readings of their /metrics as busy fraction, processed rate and p99,
and what it changes in the decision (Pods that keep up now give one)."""

from __future__ import annotations

import math

import pytest

from baton.operator.core.autoscaling import (
    AutoscalingPolicy,
    OffsetsReading,
    PodReading,
    ScalingRules,
    StepPolicy,
    decide,
    pod_sample,
    pod_samples,
    sample_from_offsets,
    with_pods,
)
from baton.operator.core.autoscaling.pods import increase, quantile
from baton.operator.core.autoscaling.state import History

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
INF = math.inf
NO_WINDOWS = dict(
    scale_up=ScalingRules(0, (StepPolicy("Percent", 1000, 60),)),
    scale_down=ScalingRules(0, (StepPolicy("Percent", 100, 60),)),
)
BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, INF)


def buckets(counts: dict[float, float], series: str = "task=0_0") -> dict[tuple[str, float], float]:
    """Cumulative buckets of one latency series from per-bucket counts (not cumulative)."""
    out, total = {}, 0.0
    for le in BOUNDS:
        total += counts.get(le, 0.0)
        out[(series, le)] = total
    return out


def pod(
    at: float,
    busy: dict[str, float] | None = None,
    consumed: float = 0.0,
    latency: dict[tuple[str, float], float] | None = None,
    *,
    name: str = "app-blue-0",
    uid: str = "u0",
) -> PodReading:
    return PodReading(
        name,
        uid,
        at,
        busy if busy is not None else {"": 0.0},
        {"topic=in,partition=0": consumed},
        latency or {},
    )


def test_busy_fraction_and_processed_rate_between_two_readings() -> None:
    s = pod_sample(pod(NOW - 10, {"": 100.0}, 5_000), pod(NOW, {"": 103.0}, 6_000))
    assert s is not None
    assert s.pod == "app-blue-0" and s.busy == pytest.approx(0.3)
    assert s.processed_rate == pytest.approx(100.0)
    assert s.utilization == pytest.approx(0.3)
    assert s.latency_p99_seconds is None  # no commit observed in between


def test_a_multi_process_pods_busy_seconds_are_summed_and_averaged_per_process() -> None:
    before = pod(NOW - 10, {"0": 10.0, "1": 10.0})
    # process 0 saturated (10 s of 10), process 1 idle: the Pod is half busy
    s = pod_sample(before, pod(NOW, {"0": 20.0, "1": 10.0}))
    assert s is not None and s.busy == pytest.approx(0.5)
    # clock skew between the loop and the scrapes cannot make it more than fully busy
    s = pod_sample(before, pod(NOW, {"0": 21.0, "1": 21.0}))
    assert s is not None and s.busy == 1.0


def test_counter_resets_count_as_prometheus_increase_does() -> None:
    # a process restarted: its series went down, so its increase is its value since the restart
    assert increase({"a": 50.0, "b": 10.0}, {"a": 3.0, "b": 12.0}) == 5.0
    # a series new since the last reading (a partition assigned) counts whole; one gone counts nothing
    assert increase({"a": 5.0, "gone": 99.0}, {"a": 6.0, "new": 4.0}) == 5.0


def test_p99_from_the_increase_of_the_buckets() -> None:
    before = buckets({0.05: 1000})  # old observations must not weigh in
    # 100 commits in between: 90 under 0.1 s, 9 in 0.25..0.5, 1 in 0.5..1 -> rank 99 in 0.25..0.5
    after = {k: v + buckets({0.1: 90, 0.5: 9, 1.0: 1})[k] for k, v in before.items()}
    s = pod_sample(pod(NOW - 10, latency=before), pod(NOW, latency=after))
    assert s is not None and s.latency_p99_seconds == pytest.approx(0.5)
    # interpolation inside the bucket, as histogram_quantile: 200 in 0.25..0.5 -> rank 198 at 0.4975
    assert quantile(0.99, {0.25: 0, 0.5: 200, INF: 200}) == pytest.approx(0.4975)
    # in the +Inf bucket: the highest finite bound; no observation: no p99
    assert quantile(0.99, {0.5: 0, 1.0: 0, INF: 10}) == 1.0
    assert quantile(0.99, {0.5: 0, INF: 0}) is None


def test_p99_sums_the_tasks_and_a_task_gone_or_reset_does_not_go_negative() -> None:
    before = {**buckets({0.05: 10}, "task=0_0"), **buckets({0.05: 10}, "task=0_1")}
    # task 0_0 revoked (its series removed), 0_1 moved on slowly, 0_2 new and reset-free
    after = {**buckets({0.05: 10, 1.0: 50}, "task=0_1"), **buckets({1.0: 50}, "task=0_2")}
    s = pod_sample(pod(NOW - 10, latency=before), pod(NOW, latency=after))
    assert s is not None and s.latency_p99_seconds is not None
    assert 0.5 < s.latency_p99_seconds <= 1.0


@pytest.mark.parametrize(
    "before",
    [
        None,
        pod(NOW - 10, uid="another"),  # the Pod was recreated under its name
        pod(NOW - 10, {"0": 1.0, "1": 1.0}),  # its process count changed
        pod(NOW),  # no time passed
    ],
    ids=["first", "recreated", "processes", "same-time"],
)
def test_no_pod_sample_without_a_comparable_reading(before: PodReading | None) -> None:
    assert pod_sample(before, pod(NOW, {"": 1.0})) is None


def test_a_worker_without_the_busy_counter_reports_no_busy_fraction() -> None:
    s = pod_sample(pod(NOW - 10, {}, 0), pod(NOW, {}, 100))
    assert s is not None and s.busy is None and s.processed_rate == pytest.approx(10)


def test_every_pod_or_none() -> None:
    before = {"a": pod(NOW - 10, name="a"), "b": pod(NOW - 10, name="b")}
    now = {"a": pod(NOW, name="a"), "b": pod(NOW, name="b")}
    got = pod_samples(before, now)
    assert got is not None and [p.pod for p in got] == ["a", "b"]
    # a Pod new since the last scrape has no rates yet: the pass has no Pod figures at all
    assert pod_samples(before, {**now, "c": pod(NOW, name="c")}) is None
    assert pod_samples({}, {}) is None


def _offsets(at: float, committed: int, end: int) -> OffsetsReading:
    return OffsetsReading(at, "app-blue", {("in", p): (committed, end) for p in range(4)})


def _policy(**kw: object) -> AutoscalingPolicy:
    return AutoscalingPolicy(**{"min_replicas": 1, "max_replicas": 10, **NO_WINDOWS, **kw})  # type: ignore[arg-type]


def test_pods_that_keep_up_now_give_a_decision_to_scale_in() -> None:
    """Offsets alone: the Pods keep up, so no decision (``heldBy: metrics``). With their busy
    fraction, three Pods 10 % busy at 400 records/s say one Pod does 1,333/s fully busy: one is enough."""
    offsets = sample_from_offsets(_offsets(NOW - 10, 0, 0), _offsets(NOW, 1000, 1000), pods=3)
    policy = _policy(lag_records=100)
    d = decide(policy, offsets, History(), NOW, current=3, tasks=4, standby_replicas=0)
    assert (d.desired, d.held_by) == (3, "metrics")
    pods = pod_samples(
        {n: pod(NOW - 10, {"": 0.0}, 0, name=n) for n in ("p0", "p1", "p2")},
        {n: pod(NOW, {"": 1.0}, 1333.3, name=n) for n in ("p0", "p1", "p2")},
    )
    sample = with_pods(offsets, pods)
    assert offsets is not None and sample is not None
    assert sample.tasks == offsets.tasks and sample.pods == pods
    d = decide(policy, sample, History(), NOW, current=3, tasks=4, standby_replicas=0)
    assert d.desired == 1 and d.held_by is None, d.reason
    assert "busy fraction unknown" not in d.reason and "10% busy" in d.reason


def test_a_p99_over_its_target_forbids_the_scale_in() -> None:
    offsets = sample_from_offsets(_offsets(NOW - 10, 0, 0), _offsets(NOW, 1000, 1000), pods=2)
    slow = buckets({INF: 100})  # every commit over 1 s
    pods = pod_samples(
        {n: pod(NOW - 10, {"": 0.0}, 0, name=n) for n in ("p0", "p1")},
        {n: pod(NOW, {"": 1.0}, 2000, slow, name=n) for n in ("p0", "p1")},
    )
    d = decide(
        _policy(latency_p99_seconds=0.5),
        with_pods(offsets, pods),
        History(),
        NOW,
        current=2,
        tasks=4,
        standby_replicas=0,
    )
    assert d.desired == 2 and "no scale-in while the p99 latency" in d.reason


def test_the_pods_alone_make_no_sample() -> None:
    """Without the offsets there is no input rate to size for: the Pods' figures wait for them."""
    assert with_pods(None, pod_samples({"a": pod(NOW - 10, name="a")}, {"a": pod(NOW, name="a")})) is None
    offsets = sample_from_offsets(_offsets(NOW - 10, 0, 0), _offsets(NOW, 10, 10), pods=1)
    assert with_pods(offsets, None) is offsets
