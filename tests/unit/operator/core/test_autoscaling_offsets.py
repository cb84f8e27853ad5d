"""The operator's own sample (consumer offsets, no busy fraction) and spec.autoscaling's model."""

from __future__ import annotations

import pytest

from baton.operator.core.autoscaling import (
    AutoscalingPolicy,
    OffsetsReading,
    ScalingRules,
    StepPolicy,
    decide,
    measure,
    sample_from_offsets,
    task_count,
)
from baton.operator.core.autoscaling.policy import DEFAULT_SCALE_DOWN, DEFAULT_SCALE_UP
from baton.operator.core.autoscaling.state import History
from baton.operator.core.spec import AutoscalingSpec

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
NO_WINDOWS = dict(
    scale_up=ScalingRules(0, (StepPolicy("Percent", 1000, 60),)),
    scale_down=ScalingRules(0, (StepPolicy("Percent", 100, 60),)),
)


def reading(at: float, offsets: dict[int, tuple[int, int]], group: str = "app-blue") -> OffsetsReading:
    return OffsetsReading(at, group, {("in", p): v for p, v in offsets.items()})


def test_two_readings_give_rates_and_lag_per_partition() -> None:
    before = reading(NOW - 10, {0: (100, 200), 1: (0, 0)})
    after = reading(NOW, {0: (300, 1200), 1: (50, 100), 2: (5, 5)})
    s = sample_from_offsets(before, after, pods=2)
    assert s is not None
    by_task = {t.task: t for t in s.tasks}
    assert set(by_task) == {"in[0]", "in[1]"}  # partition 2 has no earlier reading
    assert (by_task["in[0]"].lag, by_task["in[0]"].input_rate, by_task["in[0]"].processed_rate) == (
        900,
        100,
        20,
    )
    assert [p.processed_rate for p in s.pods] == [12.5, 12.5]
    assert all(p.utilization is None for p in s.pods)


@pytest.mark.parametrize(
    "before",
    [None, reading(NOW - 10, {0: (0, 0)}, group="app-blue-g1"), reading(NOW, {0: (0, 0)})],
    ids=["first", "another-group", "same-time"],
)
def test_no_sample_without_a_comparable_reading(before: OffsetsReading | None) -> None:
    assert sample_from_offsets(before, reading(NOW, {0: (10, 20)}), pods=1) is None


def test_tasks_are_source_partitions_plus_each_repartition_topics() -> None:
    offsets = {
        ("clicks", 0): (0, 0),
        ("clicks", 1): (0, 0),
        ("users", 0): (0, 0),  # co-partitioned with clicks: the same tasks
        ("app-blue-by-user-repartition", 0): (0, 0),
        ("app-blue-by-user-repartition", 1): (0, 0),
        ("app-blue-by-user-repartition", 2): (0, 0),
    }
    assert task_count(offsets, "app-blue") == 5


def _policy(**kw: object) -> AutoscalingPolicy:
    return AutoscalingPolicy(**{"min_replicas": 1, "max_replicas": 10, **NO_WINDOWS, **kw})  # type: ignore[arg-type]


def test_lag_over_target_counts_the_pods_fully_busy_at_the_processed_rate() -> None:
    # 4 partitions, 100/s in each, the group commits 40/s each: lag grows past lagRecords
    before = reading(NOW - 10, {p: (0, 0) for p in range(4)})
    after = reading(NOW, {p: (400, 1000) for p in range(4)})
    s = sample_from_offsets(before, after, pods=1)
    assert s is not None
    policy = _policy(lag_records=100, drain_seconds=60)
    load = measure(policy, s)
    assert (load.basis, load.utilization) == ("processed", 1.0)
    assert load.capacity == pytest.approx(160)
    d = decide(policy, s, History(), NOW, current=1, tasks=4, standby_replicas=0)
    # 400 / (160 x 0.7) = 3.57; drain (400 + 2,400 / 60) / 160 = 2.75 -> 4 (capped by the 4 tasks)
    assert d.desired == 4 and d.held_by is None
    assert "busy fraction unknown" in d.reason


def test_keeping_up_without_a_busy_fraction_holds_and_no_input_goes_to_the_floor() -> None:
    before = reading(NOW - 10, {0: (0, 0)})
    keeping_up = sample_from_offsets(before, reading(NOW, {0: (1000, 1010)}), pods=3)
    d = decide(_policy(lag_records=100), keeping_up, History(), NOW, current=3, tasks=12, standby_replicas=0)
    assert (d.desired, d.held_by) == (3, "metrics")
    assert "keep up with the input" in d.reason
    idle = sample_from_offsets(before, reading(NOW, {0: (0, 0)}), pods=3)
    d = decide(
        _policy(lag_records=100, min_replicas=2),
        idle,
        History(),
        NOW,
        current=3,
        tasks=12,
        standby_replicas=0,
    )
    assert d.desired == 2 and "no input" in d.reason


def test_stalled_partitions_do_not_scale_out() -> None:
    """Lag over target on partitions the group does not commit at all: more Pods would not help."""
    before = reading(NOW - 10, {0: (0, 0)})
    s = sample_from_offsets(before, reading(NOW, {0: (0, 5000)}), pods=1)
    d = decide(_policy(lag_records=100), s, History(), NOW, current=1, tasks=12, standby_replicas=0)
    assert d.desired == 1


def test_the_spec_model_gives_the_policy_its_defaults() -> None:
    spec = AutoscalingSpec.model_validate({"maxReplicas": 5})
    policy = AutoscalingPolicy.from_spec(spec.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert policy == AutoscalingPolicy(min_replicas=1, max_replicas=5)
    assert (policy.scale_up, policy.scale_down) == (DEFAULT_SCALE_UP, DEFAULT_SCALE_DOWN)
    spec = AutoscalingSpec.model_validate(
        {
            "minReplicas": 2,
            "maxReplicas": 6,
            "lagSeconds": 5,
            "behavior": {
                "scaleUp": {"stabilizationWindowSeconds": 0},
                "scaleDown": {"selectPolicy": "Disabled", "policies": []},
            },
        }
    )
    policy = AutoscalingPolicy.from_spec(spec.model_dump(mode="json", by_alias=True, exclude_none=True))
    assert (policy.min_replicas, policy.max_replicas, policy.lag_seconds) == (2, 6, 5.0)
    assert policy.scale_up == ScalingRules(0, DEFAULT_SCALE_UP.policies, "Max")
    assert policy.scale_down == ScalingRules(DEFAULT_SCALE_DOWN.stabilization_window_seconds, (), "Disabled")
    assert policy.problems() == []
