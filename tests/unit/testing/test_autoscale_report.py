"""The node test's check of an early scale-out (``AutoscaleReport.early_scale_out``), on made-up samples."""

from __future__ import annotations

import pytest
from batondev.autoscale import AutoscaleConfig, AutoscaleReport, Check, Sample, Step

pytestmark = pytest.mark.unit

LOW = 100.0  # records/s over 6 partitions at lagSeconds 3: a target of 50 records a partition


def report(lags: list[int | None], step_at: float) -> AutoscaleReport:
    cfg = AutoscaleConfig(profile=((0, LOW), (60, LOW)), partitions=6, lag_seconds=3.0, scale_up_window_s=10)
    samples = [
        Sample(t=2.0 * i, target_rate=LOW, input_rate=LOW, replicas=1, ready=1, current=1, desired=1,
               held_by=None, step=None, lag=None if lag is None else lag * 6, lag_max=lag)
        for i, lag in enumerate(lags)
    ]  # fmt: skip
    steps = [Step(1, 4, step_at, step_at + 30, ["ScalingOut"])]
    return AutoscaleReport(cfg, "ns", samples, steps, Check(), [], 60, 0, 60, None, True)


def test_a_scale_out_after_the_low_rate_is_never_early() -> None:
    assert report([5, 5, 5, 5, 5, 5, 5, 5, 5], step_at=16).early_scale_out(14, LOW) is None


def test_a_scale_out_at_the_low_rate_with_the_group_behind_throughout_the_window_is_right() -> None:
    # samples at 0..12 s; the window before a step at 12 s is 2..12: all over 50 (the first is not)
    assert report([10, 60, 120, 200, 300, 400, 500], step_at=12).early_scale_out(14, LOW) is None


@pytest.mark.parametrize(
    "lags",
    [
        [5, 5, 5, 5, 5, 5, 5],  # kept up throughout
        [10, 60, 120, 40, 300, 400, 500],  # caught up once within the window
        [10, 60, 120, 50, 300, 400, 500],  # at the target is not over it
        [None, None, None, None, None, None, None],  # nothing measured: nothing shows it was behind
    ],
)
def test_a_scale_out_at_the_low_rate_while_the_group_kept_up_is_named(lags: list[int | None]) -> None:
    problem = report(lags, step_at=12).early_scale_out(14, LOW)
    assert problem is not None and "scaled out 1 -> 4 at 12s" in problem and "lag target of 50" in problem
