"""bench/autoscale.py's measures (``batondev.autoscale``): the input profile, the scaling steps
read from the sampled ``status.autoscaling``, a partition's longest output pause, and the
count of replica changes the no-flapping check uses. The node run itself is
tests/e2e/test_autoscale_node.py."""

from __future__ import annotations

from array import array

import pytest
from batondev.autoscale import AutoscaleConfig, AutoscaleReport, Check, Sample, _max_gap, steps_from

pytestmark = pytest.mark.unit

T0 = 1_800_000_000.0  # the input's start, wall clock


def _sample(t: float, replicas: int, step: dict[str, object] | None = None) -> Sample:
    return Sample(t, 100.0, 100.0, replicas, replicas, replicas, replicas, None, step, 0, 0)


def test_the_profile_is_linear_between_its_points_and_steps_at_repeated_times() -> None:
    cfg = AutoscaleConfig(profile=((0, 1000), (60, 1000), (240, 9000), (300, 9000), (300, 100), (400, 100)))
    assert cfg.rate_at(30) == 1000
    assert cfg.rate_at(150) == pytest.approx(5000)
    assert cfg.rate_at(299.9) == 9000
    assert cfg.rate_at(300) == 100  # a repeated time is a step
    assert cfg.rate_at(400) == 0 and cfg.rate_at(-1) == 0  # no input outside the profile
    assert cfg.duration_s == 400


def test_a_step_runs_from_its_started_at_to_the_first_sample_without_it() -> None:
    out = {"from": 1, "to": 3, "startedAt": "2027-01-15T08:00:09Z", "reason": "lag"}
    started_at = 1_800_000_009.0  # 2027-01-15T08:00:09Z
    samples = [
        _sample(8, 1),
        _sample(11, 3, {**out, "phase": "ScalingOut"}),
        _sample(14, 3, {**out, "phase": "WarmingUp"}),
        _sample(17, 3),
        _sample(20, 2, {"from": 3, "to": 2, "startedAt": "2027-01-15T08:00:19Z", "phase": "Draining"}),
    ]
    steps = steps_from(samples, T0, lambda t: 50.0 if t < 10 else 500.0)
    assert [(s.from_replicas, s.to_replicas) for s in steps] == [(1, 3), (3, 2)]
    first = steps[0]
    assert first.start_t == pytest.approx(started_at - T0)  # earlier than the sample that showed it
    assert first.end_t == 17 and first.phases == ["ScalingOut", "WarmingUp"] and first.reason == "lag"
    assert first.rate_at_start == 50.0  # the rate when it started, not at the sample
    assert steps[1].end_t is None and steps[1].duration_s is None  # still running at the last sample


def test_the_longest_pause_counts_the_window_edges_as_appends() -> None:
    stamps = array("d", [10.0, 10.5, 11.0, 14.0, 14.2])
    assert _max_gap(stamps, 10.0, 15.0) == pytest.approx(3.0)  # 11.0 -> 14.0
    assert _max_gap(stamps, 14.1, 20.0) == pytest.approx(5.8)  # 14.2 -> the window's end
    assert _max_gap(array("d"), 0.0, 2.5) == pytest.approx(2.5)  # nothing appended at all


def test_replica_changes_count_each_move_between_samples_in_the_window() -> None:
    samples = [_sample(t, r) for t, r in [(0, 1), (10, 2), (20, 2), (30, 3), (40, 2), (50, 2)]]
    cfg = AutoscaleConfig(profile=((0, 1), (60, 1)))
    report = AutoscaleReport(cfg, "ns", samples, [], Check(), [], 60, 0, 60, None, True)
    assert report.replica_changes(0, 50) == 3
    assert report.replica_changes(15, 35) == 1
    assert report.replica_changes(45, 50) == 0
