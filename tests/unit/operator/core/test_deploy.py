"""The deploy/flip state machine, step by step, without a cluster.

Each test drives :func:`baton.operator.core.deploy.plan` the way the reconciler does: feed the
previous plan's record back in, with what the colors report and the time.
"""

from __future__ import annotations

from typing import Any

import pytest

from baton.control.messages import Color
from baton.operator.core.deploy import (
    ANNOTATION_PROMOTE,
    ANNOTATION_ROLLBACK,
    ColorView,
    FlipOutcome,
    Inputs,
    Plan,
    plan,
)
from baton.operator.core.deploy_record import Assignment, DeployRecord, from_status, to_status
from baton.operator.core.spec import UpgradeSpec

pytestmark = pytest.mark.unit

UP = UpgradeSpec(promotion_stable_seconds=10, promotion_timeout_seconds=100, standby_upgrade_delay_seconds=50)
READY = ColorView(True, lag=0, message="3/3 Pods ready")
NOT_READY = ColorView(False, message="1/3 Pods ready")


def inputs(record: DeployRecord | None, now: float, revision: str = "r1", **kw: Any) -> Inputs:
    base: dict[str, Any] = {
        "colors": ("blue", "green"),
        "upgrade": UP,
        "revision": revision,
        "spec": f'{{"rev":"{revision}"}}',
        "record": record,
        "active": "blue",
        "views": {"blue": READY, "green": READY},
        "now": now,
    }
    base.update(kw)
    return Inputs(**base)


def step(prev: Plan | None, now: float, **kw: Any) -> Plan:
    """The next plan, carrying over record and active color from ``prev``, as the status does."""
    if prev is not None:
        kw.setdefault("active", prev.active)
        kw.setdefault("record", from_status(to_status(prev.record)))  # through status, as in the cluster
    return plan(inputs(kw.pop("record", None), now, **kw))


def stable(revision: str = "r1") -> Plan:
    first = step(None, 0, revision=revision)
    assert first.phase == "Stable" and first.flip is None
    return first


def reasons(p: Plan) -> list[str]:
    return [e.reason for e in p.events]


def test_a_new_app_runs_one_revision_on_both_colors_and_becomes_stable() -> None:
    p = step(None, 0, views={"blue": NOT_READY, "green": NOT_READY})
    assert p.phase == "Deploying" and p.active == "blue"
    assert p.record.colors == {"blue": Assignment("r1"), "green": Assignment("r1")}
    assert p.record.specs == {"r1": '{"rev":"r1"}'}
    p = step(p, 1)
    assert p.phase == "Stable" and p.requeue_after == 30 and not p.events


def test_blue_green_deploy_updates_idle_color_waits_flips_and_upgrades_standby_later() -> None:
    p = stable()
    # Spec change: only green gets r2; blue keeps r1 (and its spec text).
    p = step(p, 10, revision="r2", views={"blue": READY, "green": NOT_READY})
    assert p.phase == "Deploying" and reasons(p) == ["DeployStarted"]
    assert p.record.colors["blue"].revision == "r1" and p.record.colors["green"].revision == "r2"
    assert set(p.record.specs) == {"r1", "r2"}
    # not ready: no polling (the StatefulSet's events wake the loop), only the timeout's own look
    assert p.flip is None and p.requeue_after == 30
    # Ready but lagging: still Deploying.
    p = step(p, 20, revision="r2", views={"blue": READY, "green": ColorView(True, lag=5000)})
    assert p.phase == "Deploying" and "lag 5000 > maxLagToPromote 1000" in p.message
    # Ready and caught up: Promoting for promotionStableSeconds.
    p = step(p, 30, revision="r2")
    assert p.phase == "Promoting" and p.flip is None
    p = step(p, 35, revision="r2")
    assert p.phase == "Promoting"
    # A lag spike restarts the stable window.
    p = step(p, 38, revision="r2", views={"blue": READY, "green": ColorView(True, lag=2000)})
    assert p.phase == "Deploying"
    p = step(p, 40, revision="r2")
    p = step(p, 49, revision="r2")
    assert p.phase == "Promoting"
    p = step(p, 50, revision="r2")
    assert p.phase == "Flipping" and p.flip == "green" and p.flip_in_progress
    assert reasons(p) == ["FlipStarted"]
    # While the flip runs, nobody starts another one.
    running = step(p, 51, revision="r2", flip_running=True)
    assert running.flip is None and running.phase == "Flipping"
    # Committed: green is active, the deploy is promoted, blue keeps r1 for 50 s.
    p = step(p, 52, revision="r2", flip=FlipOutcome("green", True, epoch=1))
    assert p.active == "green" and p.phase == "Stable" and p.flip is None
    assert reasons(p) == ["Promoted"]
    assert p.outcome == ("promoted", 42.0)
    assert p.record.colors["blue"].revision == "r1" and p.record.standby == "blue"
    p = step(p, 80, revision="r2")
    assert p.record.colors["blue"].revision == "r1" and "rollback target" in p.message
    assert p.requeue_after <= 22
    p = step(p, 102, revision="r2")
    assert reasons(p) == ["StandbyUpgraded"] and p.record.colors["blue"] == Assignment("r2")
    assert p.record.standby is None and set(p.record.specs) == {"r2"}


def test_manual_promotion_waits_for_the_annotation_and_clears_it() -> None:
    up = UP.model_copy(update=dict(auto_promote=False, promotion_stable_seconds=0))
    p = step(stable(), 1, revision="r2", upgrade=up)
    p = step(p, 2, revision="r2", upgrade=up)
    assert p.phase == "Promoting" and p.flip is None and ANNOTATION_PROMOTE in p.message
    assert p.clear_annotations == ()
    p = step(p, 500, revision="r2", upgrade=up)  # waiting for a human is not a timeout
    assert p.phase == "Promoting" and not p.stalled_reason
    p = step(p, 501, revision="r2", upgrade=up, promote=True)
    assert p.flip == "green" and p.clear_annotations == (ANNOTATION_PROMOTE,)


def test_a_deploy_not_ready_by_the_timeout_is_abandoned_and_the_active_color_untouched() -> None:
    p = step(stable(), 0, revision="r2", views={"blue": READY, "green": NOT_READY})
    p = step(p, 99, revision="r2", views={"blue": READY, "green": NOT_READY})
    assert p.phase == "Deploying"
    p = step(p, 100, revision="r2", views={"blue": READY, "green": NOT_READY})
    assert p.phase == "Stalled" and p.stalled_reason == "DeployAbandoned"
    assert "1/3 Pods ready" in p.message and p.active == "blue"
    assert reasons(p) == ["DeployAbandoned"] and p.outcome == ("abandoned", 100.0)
    # It stays abandoned, even when green becomes ready later: no flip.
    p = step(p, 200, revision="r2")
    assert p.phase == "Stalled" and p.flip is None and not p.events
    # A new spec starts a new deploy.
    p = step(p, 300, revision="r3", views={"blue": READY, "green": NOT_READY})
    assert p.phase == "Deploying" and not p.stalled_reason and p.record.colors["green"].revision == "r3"


def test_promote_annotation_rearms_an_abandoned_deploy() -> None:
    p = step(stable(), 0, revision="r2", views={"blue": READY, "green": NOT_READY})
    p = step(p, 100, revision="r2", views={"blue": READY, "green": NOT_READY})
    assert p.stalled_reason == "DeployAbandoned"
    p = step(p, 150, revision="r2", promote=True)
    assert reasons(p)[0] == "DeployResumed" and p.phase == "Promoting" and not p.stalled_reason


def test_an_aborted_flip_is_retried_with_backoff_and_a_refusal_abandons() -> None:
    up = UP.model_copy(update=dict(promotion_stable_seconds=0))
    p = step(stable(), 0, revision="r2", upgrade=up)
    assert p.flip == "green"
    p = step(
        p,
        1,
        revision="r2",
        upgrade=up,
        flip=FlipOutcome("green", False, 1, "no position before the deadline"),
    )
    assert p.active == "blue" and p.phase == "Promoting" and reasons(p) == ["FlipAborted"]
    assert p.events[0].type == "Warning"
    p = step(p, 3, revision="r2", upgrade=up)
    assert p.flip is None and "retrying" in p.message
    p = step(p, 6, revision="r2", upgrade=up)
    assert p.flip == "green"
    p = step(
        p,
        7,
        revision="r2",
        upgrade=up,
        flip=FlipOutcome("green", False, 2, "blue worker w refuses the flip: x", refused=True),
    )
    assert p.phase == "Stalled" and p.stalled_reason == "DeployAbandoned" and "refused" in p.message


def test_restart_mid_flip_replays_the_flip_and_the_control_topic_decides() -> None:
    up = UP.model_copy(update=dict(promotion_stable_seconds=0))
    p = step(stable(), 0, revision="r2", upgrade=up)
    assert p.phase == "Flipping"
    # The operator died during the flip: the record says Flipping, no flip runs in this process.
    again = step(p, 30, revision="r2", upgrade=up)
    assert again.flip == "green" and again.phase == "Flipping"
    # The control topic shows the flip had committed: recorded once, nothing flipped again.
    done = step(p, 30, revision="r2", upgrade=up, control_active="green")
    assert done.active == "green" and done.flip is None and reasons(done) == ["Promoted"]
    assert step(done, 31, revision="r2", upgrade=up, control_active="green").flip is None


def test_rollback_after_the_flip_flips_back_and_does_not_promote_again() -> None:
    up = UP.model_copy(update=dict(promotion_stable_seconds=0))
    p = step(stable(), 0, revision="r2", upgrade=up)
    p = step(p, 1, revision="r2", upgrade=up, flip=FlipOutcome("green", True, 1))
    assert p.active == "green"
    p = step(p, 5, revision="r2", upgrade=up, rollback=True)
    assert p.phase == "RollingBack" and p.flip == "blue" and p.clear_annotations == (ANNOTATION_ROLLBACK,)
    p = step(p, 6, revision="r2", upgrade=up, flip=FlipOutcome("blue", True, 2))
    assert p.active == "blue" and reasons(p) == ["RolledBack"] and p.outcome is not None
    assert p.outcome[0] == "rolled_back"
    assert p.stalled_reason == "RolledBack" and p.record.colors["blue"].revision == "r1"
    # Long after: still not promoted, the old color is not upgraded.
    p = step(p, 500, revision="r2", upgrade=up)
    assert p.flip is None and p.active == "blue" and p.record.colors["green"].revision == "r2"
    # Promote resumes.
    p = step(p, 501, revision="r2", upgrade=up, promote=True)
    assert p.flip == "green" or p.phase in ("Promoting", "Flipping")


def test_an_autoscaling_step_holds_the_deploys_flip_and_a_shrinking_target_holds_a_rollback() -> None:
    up = UP.model_copy(update=dict(promotion_stable_seconds=0))
    step_runs = "the scale step 2 -> 4 of blue is WarmingUp: the flip waits for it"
    p = step(stable(), 0, revision="r2", upgrade=up, scale_hold=step_runs)
    assert p.flip is None and reasons(p) == ["DeployStarted"]
    p = step(p, 1, revision="r2", upgrade=up, scale_hold=step_runs)
    assert p.flip is None and p.phase == "Promoting" and step_runs in p.message and p.requeue_after <= 5
    p = step(p, 2, revision="r2", upgrade=up, promote=True, scale_hold=step_runs)
    assert p.flip is None and p.clear_annotations == ()  # the promotion asked for stays asked
    p = step(p, 3, revision="r2", upgrade=up)
    assert p.flip == "green" and reasons(p) == ["FlipStarted"]
    p = step(p, 4, revision="r2", upgrade=up, flip=FlipOutcome("green", True, 1))
    assert p.active == "green"
    shrinking = "blue still removes Pods (4 -> 2): the flip waits for it"
    p = step(p, 5, revision="r2", upgrade=up, rollback=True, scale_hold_rollback=shrinking)
    assert p.flip is None and p.active == "green" and shrinking in p.message
    assert ANNOTATION_ROLLBACK not in p.clear_annotations  # it runs once the Pods are gone
    p = step(p, 6, revision="r2", upgrade=up, rollback=True)
    assert p.phase == "RollingBack" and p.flip == "blue" and p.clear_annotations == (ANNOTATION_ROLLBACK,)


def test_rollback_before_the_flip_stops_the_deploy() -> None:
    p = step(stable(), 0, revision="r2", views={"blue": READY, "green": NOT_READY})
    p = step(p, 1, revision="r2", rollback=True)
    assert p.flip is None and p.active == "blue" and p.record.rolled_back == "r2"
    assert p.stalled_reason == "RolledBack"


def test_an_external_flip_is_followed() -> None:
    p = stable()
    p = step(p, 5, control_active="green")
    assert p.active == "green" and "ExternalFlip" in reasons(p) and not p.stalled_reason
    # a brand-new record adopts whatever the control topic says, quietly
    fresh = step(None, 0, control_active="green")
    assert fresh.active == "green"


def test_our_flip_aborted_while_a_flip_by_hand_committed_follows_the_control_topic() -> None:
    """Found by the model check (tests/unit/operator/core/test_flip_model.py): the operator's rollback flip
    to green aborts, a ``baton flip --to green`` by hand commits at the next epoch, and the
    pass that learns of the abort also reads green at that epoch. Taking blue for active, a
    Rebuild deploy then gave green, the active color, a new generation from offset 0."""
    up = UP.model_copy(update=dict(state_migration="Rebuild"))
    p = step(stable(), 0, upgrade=up, rollback=True)
    aborted = FlipOutcome("green", False, 1, reason="a worker gave up")
    p = step(p, 1, upgrade=up, flip=aborted, control_active="green", control_epoch=2)
    assert p.active == "green" and "ExternalFlip" in reasons(p)
    p = step(p, 2, revision="r2", upgrade=up, control_active="green", control_epoch=2)
    assert p.record.colors["green"].generation == 0, "the active color must never be rebuilt"
    assert p.record.colors["blue"].revision == "r2" and p.record.colors["blue"].generation == 1
    # a control read older than the flip that just ended says nothing about it
    q = step(stable(), 0, upgrade=up, rollback=True)
    q = step(q, 1, upgrade=up, flip=FlipOutcome("green", True, 3), control_active="blue", control_epoch=2)
    assert q.active == "green" and "ExternalFlip" not in reasons(q)


def test_spec_changes_during_a_deploy_supersede_or_cancel_it() -> None:
    p = step(stable(), 0, revision="r2", views={"blue": READY, "green": NOT_READY})
    p = step(p, 5, revision="r3", views={"blue": READY, "green": NOT_READY})
    assert p.record.colors["green"].revision == "r3" and p.record.started_at == 5
    assert "superseded" in p.events[0].message
    p = step(p, 6, revision="r1", views={"blue": READY, "green": NOT_READY})
    assert reasons(p) == ["DeployCancelled"] and p.record.colors["green"].revision == "r1"
    assert p.record.target is None


def test_rebuild_gives_the_idle_color_a_new_generation_each_time() -> None:
    up = UP.model_copy(
        update=dict(state_migration="Rebuild", promotion_stable_seconds=0, standby_upgrade_delay_seconds=0)
    )
    p = step(
        stable(), 0, revision="r2", upgrade=up, views={"blue": READY, "green": ColorView(True, lag=None)}
    )
    assert p.record.colors["green"] == Assignment("r2", 1)
    assert p.phase == "Deploying" and "lag unknown" in p.message  # a fresh group: not caught up
    p = step(p, 1, revision="r2", upgrade=up)
    assert p.flip == "green"
    p = step(p, 2, revision="r2", upgrade=up, flip=FlipOutcome("green", True, 1))
    p = step(p, 3, revision="r2", upgrade=up)
    assert p.record.colors["blue"] == Assignment("r2", 2)


def test_reuse_keeps_generations() -> None:
    p = step(stable(), 0, revision="r2")
    assert p.record.colors["green"] == Assignment("r2", 0)


def test_rolling_strategy_one_color() -> None:
    rolling = UP.model_copy(update=dict(strategy="Rolling"))
    colors: tuple[Color, ...] = ("blue",)
    p = step(None, 0, upgrade=rolling, colors=colors, views={"blue": READY})
    assert p.phase == "Stable" and not p.roll
    p = step(p, 1, revision="r2", upgrade=rolling, colors=colors, views={"blue": NOT_READY})
    assert p.phase == "Deploying" and p.roll and p.record.colors == {"blue": Assignment("r2")}
    p = step(p, 2, revision="r2", upgrade=rolling, colors=colors, views={"blue": READY})
    assert p.phase == "Stable" and not p.roll and reasons(p) == ["Deployed"]
    p = step(p, 3, revision="r2", upgrade=rolling, colors=colors, rollback=True)
    assert reasons(p) == ["RollbackUnsupported"] and p.clear_annotations == (ANNOTATION_ROLLBACK,)
    p = step(p, 4, revision="r3", upgrade=rolling, colors=colors, views={"blue": NOT_READY})
    p = step(p, 200, revision="r3", upgrade=rolling, colors=colors, views={"blue": NOT_READY})
    assert p.phase == "Stalled" and not p.roll


def test_record_round_trips_through_status() -> None:
    rec = DeployRecord(
        colors={"blue": Assignment("a", 2), "green": Assignment("b")},
        specs={"a": "{}", "b": "{}"},
        phase="Promoting",
        target="green",
        revision="b",
        started_at=1_700_000_000,
        ready_since=1_700_000_010,
        flip_attempts=2,
        rolled_back="z",
    )
    assert from_status(to_status(rec)) == rec
    assert from_status(None) is None and from_status({}) is None


def test_a_view_of_the_old_assignment_never_promotes_the_new_one() -> None:
    """The pass that gives green r2 saw green ready at r1: that must not count as r2 ready."""
    up = UP.model_copy(update={"promotion_stable_seconds": 0})
    old = Assignment("r1")
    views = {"blue": replace_view(READY, old), "green": replace_view(READY, old)}
    p = step(stable(), 0, revision="r2", upgrade=up, views=views)
    assert p.flip is None and p.phase == "Deploying" and p.record.ready_since is None
    rolling = UP.model_copy(update={"strategy": "Rolling"})
    r = step(None, 0, upgrade=rolling, colors=("blue",), views={"blue": READY})
    r = step(r, 1, revision="r2", upgrade=rolling, colors=("blue",), views={"blue": replace_view(READY, old)})
    assert r.phase == "Deploying" and r.roll and "Deployed" not in reasons(r)


def test_a_never_created_active_color_takes_the_current_spec() -> None:
    """A spec the cluster refused left no StatefulSet: the fixed spec goes to both colors."""
    gone = ColorView(False, exists=False)
    refused = step(None, 0, views={"blue": gone, "green": gone})
    assert refused.record.created == ()
    p = step(refused, 1, revision="r2", views={"blue": gone, "green": gone})
    assert p.record.colors == {"blue": Assignment("r2"), "green": Assignment("r2")}
    assert "DeployStarted" not in reasons(p)


def test_a_deleted_active_color_is_recreated_at_its_own_revision_mid_deploy() -> None:
    """Issue 18: deleting the active StatefulSet during a deploy must not promote the new spec
    to it without the idle color's readiness gate and a flip (it would emit the new code's
    output from a color nobody checked, and skip the flip's exactly-once hand-over)."""
    p = step(stable(), 1, revision="r2", views={"blue": READY, "green": NOT_READY})
    assert p.record.created == ("blue", "green") and p.record.target == "green"
    gone = ColorView(False, exists=False)
    p = step(p, 2, revision="r2", views={"blue": gone, "green": NOT_READY})
    assert p.record.colors["blue"] == Assignment("r1"), "the active color keeps its revision"
    assert p.record.colors["green"] == Assignment("r2") and p.record.target == "green"
    assert p.active == "blue" and p.flip is None
    # once green is ready and blue is back, the deploy goes on through a flip as usual
    up = UP.model_copy(update={"promotion_stable_seconds": 0})
    p = step(p, 3, revision="r2", upgrade=up, views={"blue": READY, "green": READY})
    assert p.flip == "green"


def replace_view(view: ColorView, assignment: Assignment) -> ColorView:
    return ColorView(view.ready, view.lag, view.message, view.exists, assignment)


def test_while_the_old_active_drains_nothing_flips_and_the_idle_color_keeps_its_generation() -> None:
    """Issue 16, hole 2: a rollback (or a Rebuild of the idle color) before the drain is out
    would lose or duplicate the old active's last records below the cut."""
    up = UP.model_copy(update=dict(promotion_stable_seconds=0, state_migration="Rebuild"))
    p = step(stable(), 0, revision="r2", upgrade=up)
    p = step(
        p,
        1,
        revision="r2",
        upgrade=up,
        flip=FlipOutcome("green", True, 1, "blue has not drained", draining=True),
    )
    assert p.active == "green" and "FlipDraining" in reasons(p)
    draining = ("clicks:3",)
    p = step(p, 5, revision="r2", upgrade=up, rollback=True, draining=draining)
    assert p.flip is None and p.clear_annotations == () and p.phase != "RollingBack"
    assert "waiting for blue to emit everything below the cut on clicks:3" in p.message
    # a new revision now would rebuild blue (from offset 0) while it still owes records: it waits
    p = step(p, 6, revision="r3", upgrade=up, draining=draining)
    assert p.record.colors["blue"].revision == "r1" and p.flip is None
    # drained: the rollback asked for runs, and annotations are cleared then
    p = step(p, 7, revision="r2", upgrade=up, rollback=True)
    assert p.phase == "RollingBack" and p.flip == "blue" and p.clear_annotations == (ANNOTATION_ROLLBACK,)
