"""The autoscaler's decision (``baton.operator.core.autoscaling.decide``): formula, bounds, holds,
lag drain, stabilisation, step policies, and what a person reads in the reason."""

from __future__ import annotations

import math
import random

import pytest

from baton.operator.core.autoscaling import (
    AutoscalingPolicy,
    AutoscalingState,
    History,
    PodSample,
    Recommendation,
    Sample,
    ScaleEvent,
    ScalingRules,
    Step,
    StepPolicy,
    TaskSample,
    bounds,
    decide,
    from_status,
    measure,
    to_status,
    with_scale_event,
)

pytestmark = pytest.mark.unit

NOW = 1_800_000_000.0
# windows off unless a test is about them: one pass decides
NO_WINDOWS = dict(
    scale_up=ScalingRules(0, (StepPolicy("Percent", 1000, 60),)),
    scale_down=ScalingRules(0, (StepPolicy("Percent", 100, 60),)),
)


def policy(**kw: object) -> AutoscalingPolicy:
    args: dict[str, object] = {"min_replicas": 1, "max_replicas": 20, **NO_WINDOWS}
    args.update(kw)
    return AutoscalingPolicy(**args)  # type: ignore[arg-type]


def sample(
    rate: float,
    pods: int,
    capacity: float,
    *,
    tasks: int = 12,
    lag: int = 0,
    p99: float | None = None,
    at: float = NOW,
    busy: bool = True,
) -> Sample:
    """A steady app: ``rate`` spread over ``tasks``, ``pods`` sharing the work, each ``capacity``/s fully busy."""
    processed = min(rate, pods * capacity)
    per_pod = processed / pods
    util = per_pod / capacity
    return Sample(
        at,
        tuple(TaskSample(f"0_{i}", lag // tasks, rate / tasks, processed / tasks) for i in range(tasks)),
        tuple(
            PodSample(
                f"app-blue-{i}",
                per_pod,
                busy=util if busy else None,
                cpu=None if busy else util,
                latency_p99_seconds=p99,
            )
            for i in range(pods)
        ),
    )


def run(p: AutoscalingPolicy, s: Sample | None, current: int, **kw: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {"current": current, "tasks": 12, "standby_replicas": 0}
    args.update(kw)
    history = args.pop("history", History())
    now = args.pop("now", NOW)
    return decide(p, s, history, now, **args)  # type: ignore[arg-type]


# -- the formula ------------------------------------------------------------------------------


def test_replicas_are_the_input_rate_over_the_measured_rate_at_the_target_utilisation() -> None:
    d = run(policy(), sample(1200, 3, 500), 3)
    assert d.desired == 4 == math.ceil(1200 / (500 * 0.7))
    assert d.acts and d.held_by is None
    assert d.needed == pytest.approx(1200 / 350)
    assert d.reason.startswith("scale out 3 -> 4: input 1,200 records/s, a Pod processes 500/s fully busy")
    assert "1,200 / (500 x 70%) = 3.43" in d.reason


def test_the_target_utilisation_sets_the_headroom() -> None:
    exact = dict(tolerance=0.0)
    assert run(policy(target_utilization=1.0, **exact), sample(1200, 3, 500), 2).desired == 3
    assert run(policy(target_utilization=0.5, **exact), sample(1200, 3, 500), 3).desired == 5


def test_an_exact_fit_is_not_rounded_up() -> None:
    """1,050 / (500 x 0.7) is 3 in floating point give or take an ulp: 3, not 4."""
    assert run(policy(), sample(1050, 3, 500), 3).desired == 3


def test_capacity_is_records_per_busy_second_over_all_pods() -> None:
    s = Sample(
        NOW,
        (TaskSample("0_0", 0, 400, 400),),
        (PodSample("a", 300, busy=0.6), PodSample("b", 100, busy=0.2), PodSample("c", 0, busy=None)),
    )
    load = measure(policy(), s)
    assert load.capacity == pytest.approx(500)
    assert load.utilization == pytest.approx(0.4)
    # 400 / (500 x 0.7) = 1.14 -> 2
    assert run(policy(), s, 3).desired == 2


def test_cpu_stands_in_for_a_missing_busy_fraction() -> None:
    assert run(policy(), sample(1200, 3, 500, busy=False), 3).desired == 4


def test_no_busy_fraction_nor_cpu_is_no_decision() -> None:
    s = Sample(NOW, (TaskSample("0_0", 0, 100, 100),), (PodSample("a", 100),))
    d = run(policy(min_replicas=2), s, 3)
    assert (d.desired, d.held_by) == (3, "metrics")
    assert "neither a busy fraction nor CPU" in d.reason


def test_idle_workers_go_to_the_floor_and_no_input_says_so() -> None:
    d = run(policy(min_replicas=2), sample(0, 4, 500), 4)
    assert d.desired == 2
    assert "no input" in d.reason and "raised to 2 (minReplicas 2)" in d.reason
    # 1 record/s on 4 Pods that could do 500 each: idle, not "capacity 1 record per 0.05 % busy"
    assert run(policy(), sample(1, 4, 500), 4).desired == 1


def test_input_that_nobody_processes_keeps_the_count() -> None:
    s = Sample(
        NOW, (TaskSample("0_0", 5000, 300, 0),), (PodSample("a", 0, busy=0.0), PodSample("b", 0, busy=0.0))
    )
    d = run(policy(lag_records=100), s, 2)
    assert d.desired == 2 and not d.acts
    assert "nothing is processed" in d.reason


# -- bounds ----------------------------------------------------------------------------------


def test_clamped_to_max_and_min() -> None:
    d = run(policy(max_replicas=5), sample(5000, 3, 500), 3)
    assert d.desired == 5 and "capped at 5 (maxReplicas 5)" in d.reason
    d = run(policy(min_replicas=3), sample(100, 6, 500), 6)
    assert d.desired == 3 and "raised to 3 (minReplicas 3)" in d.reason


def test_the_task_count_is_the_ceiling_per_process() -> None:
    d = run(policy(), sample(50_000, 4, 500, tasks=6), 4, tasks=6)
    assert d.desired == 6 and "6 tasks keep at most 6 Pods busy" in d.reason
    d = run(policy(), sample(50_000, 2, 1000, tasks=6), 2, tasks=6, processes_per_pod=2)
    assert d.desired == 3 and "at 2 processes per Pod" in d.reason


def test_the_standby_floor_beats_min_and_the_task_ceiling() -> None:
    b = bounds(policy(min_replicas=1, max_replicas=10), tasks=2, standby_replicas=2)
    assert (b.lo, b.hi, b.floor) == (3, 3, 3)
    d = run(policy(), sample(10, 4, 500, tasks=2), 4, tasks=2, standby_replicas=2)
    assert d.desired == 3 and "2 standby(s) per task need 3 instances" in d.reason


def test_min_above_the_task_count_is_capped_by_it() -> None:
    b = bounds(policy(min_replicas=8, max_replicas=10), tasks=4, standby_replicas=0)
    assert (b.lo, b.hi) == (4, 4)


def test_problems_are_sentences_naming_the_field() -> None:
    bad = AutoscalingPolicy(
        min_replicas=0,
        max_replicas=1,
        target_utilization=1.5,
        lag_seconds=0,
        scale_up=ScalingRules(-1, ()),
    )
    problems = bad.problems(standby_replicas=1)
    assert "spec.autoscaling.minReplicas must be at least 1" in problems
    assert any("maxReplicas must be at least standbyReplicas + 1 (2)" in p for p in problems)
    assert "spec.autoscaling.targetUtilization must be above 0 and at most 1" in problems
    assert "spec.autoscaling.lagSeconds must be above 0" in problems
    assert any("scaleUp needs a policy" in p for p in problems)
    assert any("scaleUp.stabilizationWindowSeconds" in p for p in problems)
    assert AutoscalingPolicy(1, 4).problems(standby_replicas=1) == []


# -- lag ----------------------------------------------------------------------------------


def test_lag_over_the_records_target_is_drained_within_drain_seconds() -> None:
    # 12 tasks x 10,000 lag, target 1,000 each: 108,000 over; (1,200 + 108,000/120) / 500 = 4.2 -> 5
    d = run(policy(lag_records=1000, drain_seconds=120), sample(1200, 3, 500, lag=120_000), 3)
    assert d.desired == 5
    assert (
        "108,000 records over the lag target on 12 task(s), drained within 120s at full busy: 4.20"
        in d.reason
    )
    # under the target nothing is added
    assert run(policy(lag_records=20_000), sample(1200, 3, 500, lag=120_000), 3).desired == 4


def test_lag_in_seconds_is_per_task_input_rate() -> None:
    # 100 records/s per task, 10 s allowed = 1,000 records; each task has 10,000
    s = sample(1200, 3, 500, lag=120_000)
    assert measure(policy(lag_seconds=10), s).excess_lag == 12 * 9_000
    assert measure(policy(lag_seconds=100), s).excess_lag == 12 * 0 + 0  # 100 s x 100/s = the whole lag
    # the tightest target wins
    assert measure(policy(lag_seconds=100, lag_records=4_000), s).excess_lag == 12 * 6_000


def test_a_latency_target_bounds_the_input_wait_like_lag_seconds() -> None:
    s = sample(1200, 3, 500, lag=120_000)
    assert (
        measure(policy(latency_p99_seconds=10), s).excess_lag == measure(policy(lag_seconds=10), s).excess_lag
    )


def test_tasks_that_process_nothing_do_not_count_as_lag_to_drain() -> None:
    tasks = (TaskSample("0_0", 50_000, 100, 0), TaskSample("0_1", 0, 100, 100))
    s = Sample(NOW, tasks, (PodSample("a", 100, busy=0.2),))
    load = measure(policy(lag_records=1000), s)
    assert (load.excess_lag, load.stalled) == (0, ("0_0",))
    d = run(policy(lag_records=1000), s, 1)
    assert d.desired == 1 and "process nothing (restoring or moving): not counted" in d.reason


def test_a_task_hotter_than_one_process_is_named() -> None:
    tasks = (TaskSample("0_0", 0, 900, 500), TaskSample("0_1", 0, 100, 100))
    s = Sample(NOW, tasks, (PodSample("a", 500, busy=1.0), PodSample("b", 100, busy=0.2)))
    d = run(policy(), s, 2)
    assert "task 0_0 alone gets 900 records/s" in d.reason and "cannot split it" in d.reason


# -- latency ----------------------------------------------------------------------------------


def test_no_scale_in_while_the_p99_is_over_its_target() -> None:
    over = run(policy(latency_p99_seconds=1.0), sample(100, 6, 500, p99=3.0), 6)
    assert over.desired == 6 and "no scale-in while the p99 latency 3s is over its target 1s" in over.reason
    under = run(policy(latency_p99_seconds=1.0), sample(100, 6, 500, p99=0.5), 6)
    assert under.desired == 1


def test_a_p99_over_target_with_idle_workers_is_reported_not_scaled() -> None:
    d = run(policy(latency_p99_seconds=0.1), sample(1000, 3, 500, p99=0.4), 3)
    assert d.desired == 3 and "more Pods would not lower it" in d.reason


# -- holds ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("phase", "held"),
    [("Deploying", "deploy"), ("Promoting", "deploy"), ("Flipping", "flip"), ("RollingBack", "flip")],
)
def test_a_deploy_or_a_flip_holds_the_decision_and_still_records(phase: str, held: str) -> None:
    d = run(policy(), sample(1200, 3, 500), 3, deploy_phase=phase)
    assert (d.desired, d.held_by, d.acts) == (4, held, False)
    assert d.reason.startswith("scale out 3 -> 4 (held: ")
    assert d.history.recommendations == (Recommendation(NOW, 4),)


def test_a_running_step_and_failing_pods_hold() -> None:
    step = Step("blue", "WarmingUp", 3, 5, NOW - 10, NOW - 5)
    d = run(policy(), sample(4000, 5, 500), 5, step=step)
    assert d.held_by == "step" and not d.acts and "the step 3 -> 5 is WarmingUp" in d.reason
    d = run(policy(), sample(4000, 5, 500), 5, active_ready=False)
    assert d.held_by == "unready" and not d.acts


def test_the_standby_floor_is_not_held_by_a_deploy_but_by_a_flip() -> None:
    d = run(policy(), sample(10, 1, 500), 1, standby_replicas=1, deploy_phase="Deploying")
    assert (d.desired, d.held_by, d.acts) == (2, None, True)
    d = run(policy(), sample(10, 1, 500), 1, standby_replicas=1, deploy_phase="Flipping")
    assert (d.desired, d.held_by) == (2, "flip")


def test_no_or_stale_metrics_hold_but_bounds_apply_and_windows_restart() -> None:
    history = History((Recommendation(NOW - 30, 4),), NOW - 30)
    d = run(policy(), None, 3, history=history)
    assert (d.desired, d.held_by, d.history.recommendations, d.history.since) == (3, "metrics", (), None)
    assert "no metrics from the workers" in d.reason
    d = run(policy(), sample(1200, 3, 500, at=NOW - 600), 3)
    assert d.held_by == "metrics" and "the newest metrics are 600s old" in d.reason
    d = run(policy(min_replicas=4), None, 2)
    assert (d.desired, d.held_by, d.acts) == (4, None, True)


# -- hysteresis, stabilisation, step policies ----------------------------------------------------


def test_the_tolerance_is_a_dead_band_and_a_step_lands_in_its_middle() -> None:
    p = policy(tolerance=0.2)
    # needs 3.2: the band is ceil(3.2) = 4 .. ceil(3.84) = 4, a step lands on ceil(3.52) = 4
    s = sample(3.2 * 350, 3, 500)
    assert [run(p, s, n).desired for n in (2, 3, 4, 5, 6)] == [4, 4, 4, 4, 4]
    # needs 3.7: the band is 4 .. ceil(4.44) = 5, a step lands on ceil(4.07) = 5
    s = sample(3.7 * 350, 3, 500)
    assert [run(p, s, n).desired for n in (2, 3, 4, 5, 6)] == [5, 5, 4, 5, 5]
    assert "-> 4, 5 with 10% headroom" in run(p, s, 3).reason
    assert "-> 4; 5 is within the 20% tolerance" in run(p, s, 5).reason
    assert run(policy(tolerance=0.0), s, 3).desired == 4


def test_scale_up_goes_to_the_lowest_recommendation_of_the_up_window() -> None:
    p = policy(scale_up=ScalingRules(60, (StepPolicy("Percent", 1000, 60),)))
    history = History((Recommendation(NOW - 50, 5), Recommendation(NOW - 20, 4)), since=NOW - 90)
    d = run(p, sample(3000, 3, 500), 3, history=history)  # this pass alone says 10 (8.57 x 1.1)
    assert d.recommendation == 10 and d.desired == 4
    assert "the lowest recommendation of the last 60s is 4" in d.reason
    # the window is not covered yet (recommendations since 30 s): nothing moves
    young = History((Recommendation(NOW - 20, 6),), since=NOW - 20)
    assert run(p, sample(3000, 3, 500), 3, history=young).desired == 3


def test_scale_down_goes_to_the_highest_recommendation_of_the_down_window() -> None:
    p = policy(scale_down=ScalingRules(300, (StepPolicy("Percent", 100, 60),)))
    history = History(
        (Recommendation(NOW - 400, 8), Recommendation(NOW - 250, 5), Recommendation(NOW - 100, 3)),
        since=NOW - 400,
    )
    d = run(p, sample(100, 8, 500), 8, history=history)
    assert d.desired == 5 and "the highest recommendation of the last 300s is 5" in d.reason
    assert [r.at for r in d.history.recommendations] == [NOW - 250, NOW - 100, NOW]  # older ones pruned


def test_scale_up_policies_limit_a_period_like_the_hpa() -> None:
    rules = ScalingRules(0, (StepPolicy("Pods", 2, 60), StepPolicy("Percent", 50, 60)))
    p = policy(scale_up=rules)
    d = run(p, sample(5000, 2, 500), 2)  # wants 15; +2 Pods or +50 % of 2: Max -> 4
    assert d.desired == 4 and "limited to 4 by behavior.scaleUp's policies" in d.reason
    p_min = policy(scale_up=ScalingRules(0, rules.policies, "Min"))
    assert run(p_min, sample(5000, 2, 500), 2).desired == 3
    # 2 -> 4 happened 30 s ago: the period started at 2, so 4 is as far as it goes
    moved = History(scale_events=(ScaleEvent(NOW - 30, 2, 4),))
    assert run(p, sample(5000, 4, 500), 4, history=moved).desired == 4
    assert (
        run(p, sample(5000, 4, 500), 4, history=History(scale_events=(ScaleEvent(NOW - 90, 2, 4),))).desired
        == 6
    )


def test_scale_down_policies_and_disabled() -> None:
    p = policy(scale_down=ScalingRules(0, (StepPolicy("Percent", 50, 60),)))
    assert run(p, sample(10, 9, 500), 9).desired == 4  # int(9 x 0.5)
    p = policy(scale_down=ScalingRules(0, (StepPolicy("Pods", 1, 60),), "Disabled"))
    d = run(p, sample(10, 9, 500), 9)
    assert d.desired == 9 and "scaleDown is disabled" in d.reason


def test_a_steady_rate_with_noise_changes_the_count_at_most_once() -> None:
    """Acceptance 2 on the decision alone: 1,000 passes 15 s apart at a steady rate, the busy
    fraction off by up to +-4 % (within a quarter of the default 20 % tolerance), default
    windows and policies.
    From any start the count moves one way only (the step policies may need several steps to
    get there); from a start one step can leave, it moves at most once."""
    p = AutoscalingPolicy(min_replicas=1, max_replicas=40)
    for seed in range(40):
        rng = random.Random(seed)
        rate, capacity = rng.uniform(200, 12_000), 500.0
        start = rng.randint(1, 40)
        current, history, changes = start, History(), []
        for i in range(1000):
            now = NOW + 15 * i
            processed = min(rate, current * capacity)
            util = processed / current / capacity * (1 + rng.uniform(-0.04, 0.04))
            s = Sample(
                now,
                (TaskSample("0_0", 0, rate, processed),),
                tuple(PodSample(f"p{k}", processed / current, busy=min(1.0, util)) for k in range(current)),
            )
            d = decide(p, s, history, now, current=current, tasks=40, standby_replicas=0)
            history = d.history
            if d.acts:
                history = with_scale_event(p, history, ScaleEvent(now, current, d.desired))
                changes.append((i, current, d.desired))
                current = d.desired
        ups = {to > before for _, before, to in changes}
        assert len(ups) <= 1, (seed, rate, start, changes)
        fit = math.ceil(rate / (capacity * 0.7))
        if fit // 2 <= start <= 2 * fit and start >= fit - 4:  # within one step of the fit
            assert len(changes) <= 1, (seed, rate, start, changes)


# -- the status ----------------------------------------------------------------------------------


def test_policy_from_spec_reads_the_crd_shape() -> None:
    p = AutoscalingPolicy.from_spec(
        {
            "minReplicas": 2,
            "maxReplicas": 12,
            "targetUtilization": 0.6,
            "lagSeconds": 30,
            "behavior": {
                "scaleDown": {
                    "stabilizationWindowSeconds": 600,
                    "policies": [{"type": "Pods", "value": 1, "periodSeconds": 120}],
                }
            },
        }
    )
    assert (p.min_replicas, p.max_replicas, p.target_utilization, p.lag_seconds, p.lag_records) == (
        2,
        12,
        0.6,
        30.0,
        None,
    )
    assert p.scale_down == ScalingRules(600, (StepPolicy("Pods", 1, 120),))
    assert p.scale_up == AutoscalingPolicy(1, 1).scale_up


def test_status_round_trips() -> None:
    state = AutoscalingState(
        replicas={"blue": 5, "green": 3},
        history=History(
            (Recommendation(NOW - 30, 5), Recommendation(NOW, 5)), NOW - 30, (ScaleEvent(NOW - 10, 3, 5),)
        ),
        step=Step("blue", "WarmingUp", 3, 5, NOW - 10, NOW - 4, "scale out 3 -> 5: ..."),
        desired=5,
        reason="scale out 3 -> 5: ...",
        held_by="step",
        last_scale_time=NOW - 10,
    )
    raw = to_status(state, "blue")
    assert (raw["current"], raw["desired"], raw["heldBy"], raw["step"]["phase"]) == (
        5,
        5,
        "step",
        "WarmingUp",
    )
    assert from_status(raw) == state
    assert from_status(None) is None and from_status({}) is None
