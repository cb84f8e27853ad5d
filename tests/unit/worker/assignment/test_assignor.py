"""The leader's task assignor: hand-picked scenarios, and a simulated group over time (hypothesis)."""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from baton.worker.assignment.assignor import assign
from baton.worker.assignment.model import (
    UNKNOWN_LAG,
    AssignorConfig,
    GroupAssignment,
    MemberAssignment,
    MemberReport,
    StandbyCoverage,
)
from baton.worker.naming import TaskId

pytestmark = pytest.mark.unit


# ---------------------------------------------------------------- a simulated group


@dataclass
class Sim:
    """One worker process: its identity, its local state (lag per task) and what it ran last."""

    member_id: str
    process: str
    host: str
    state: dict[TaskId, int] = field(default_factory=dict)
    roles: MemberAssignment = field(default_factory=MemberAssignment)
    zone: str = ""
    draining: bool = False

    def report(self) -> MemberReport:
        return MemberReport(
            member_id=self.member_id,
            process=self.process,
            host=self.host,
            lags=dict(self.state),
            previous_active=self.roles.active,
            previous_standby=self.roles.standby | self.roles.warmup,
            zone=self.zone,
            draining=self.draining,
        )


@dataclass
class Group:
    config: AssignorConfig
    tasks: list[TaskId]
    stateful: set[TaskId]
    members: dict[str, Sim] = field(default_factory=dict)
    last: GroupAssignment | None = None

    def join(self, process: str, host: str, member_id: str | None = None, zone: str = "") -> Sim:
        sim = Sim(member_id or f"{process}-m", process, host, zone=zone)
        self.members[sim.member_id] = sim
        return sim

    def reports(self) -> list[MemberReport]:
        return [s.report() for s in self.members.values()]

    def rebalance(self) -> GroupAssignment:
        reports = self.reports()
        result = assign(reports, self.tasks, self.stateful, self.config)
        check(reports, self.tasks, self.stateful, self.config, result)
        for mid, sim in self.members.items():
            sim.roles = result.members[mid]
        self.last = result
        return result

    def tick(self, stale: Sequence[int] = (0,)) -> None:
        """Time passes: whatever a member hosts catches up; state it no longer hosts falls behind
        (by ``stale[i]`` records on the i-th member, cycling)."""
        for i, sim in enumerate(self.members.values()):
            hosted = sim.roles.active | sim.roles.standby | sim.roles.warmup
            for t in list(sim.state):
                if t not in hosted and sim.state[t] >= 0:
                    sim.state[t] += stale[i % len(stale)]
            for t in hosted:
                if t in self.stateful:
                    sim.state[t] = 0

    def owner(self, t: TaskId) -> str:
        assert self.last is not None
        return next(mid for mid, r in self.last.members.items() if t in r.active)

    def settle(self, rounds: int = 50) -> GroupAssignment:
        """Probing rebalances with time in between until nothing is left to warm up."""
        for _ in range(rounds):
            self.tick()
            result = self.rebalance()
            if not result.probing and balanced(result, self.reports()):
                return result
        raise AssertionError("the group did not settle")


def caught_up(report: MemberReport, t: TaskId, config: AssignorConfig) -> bool:
    return (
        t in report.previous_active or 0 <= report.lags.get(t, UNKNOWN_LAG) <= config.acceptable_recovery_lag
    )


def lag_of(report: MemberReport, t: TaskId) -> float:
    """What the assignor sees: 0 for the task's previous owner, no state as infinitely behind."""
    if t in report.previous_active:
        return 0
    lag = report.lags.get(t, UNKNOWN_LAG)
    return float("inf") if lag < 0 else lag


def active_counts(result: GroupAssignment) -> list[int]:
    return [len(r.active) for r in result.members.values()]


def balanced(result: GroupAssignment, reports: Sequence[MemberReport] = ()) -> bool:
    """Counts differ by at most one among the members that stay, and the draining ones (their
    Pods go in a scale-in) own nothing, unless every member drains."""
    leaving = {r.member_id for r in reports if r.draining}
    if len(leaving) == len(result.members):
        leaving = set()
    if any(result.members[m].active for m in leaving):
        return False
    counts = [len(r.active) for mid, r in result.members.items() if mid not in leaving]
    return not counts or max(counts) - min(counts) <= 1


def actives(result: GroupAssignment) -> dict[TaskId, str]:
    return {t: mid for mid, r in result.members.items() for t in r.active}


def check(
    reports: list[MemberReport],
    tasks: Collection[TaskId],
    stateful: Collection[TaskId],
    config: AssignorConfig,
    result: GroupAssignment,
) -> None:
    """What every assignment must satisfy, whatever came before it."""
    by_id = {r.member_id: r for r in reports}
    assert set(result.members) == set(by_id)
    if not reports:
        return
    owners: dict[TaskId, list[str]] = {}
    for mid, roles in result.members.items():
        assert not roles.active & roles.standby and not roles.active & roles.warmup
        assert not roles.standby & roles.warmup
        assert (roles.standby | roles.warmup) <= set(stateful)
        for t in roles.active:
            owners.setdefault(t, []).append(mid)
    assert set(owners) == set(tasks)
    assert all(len(o) == 1 for o in owners.values()), owners
    active = {t: o[0] for t, o in owners.items()}

    k = min(config.num_standby_replicas, len(reports) - 1)
    warmups = 0
    covered = 0
    for t in stateful:
        holders = [mid for mid, r in result.members.items() if t in r.standby]
        assert len(holders) == k, (t, holders)
        covered += any(caught_up(by_id[mid], t, config) for mid in holders)
        assert active[t] not in holders
        active_host = by_id[active[t]].host
        other_hosts = sum(1 for r in reports if r.host != active_host)
        same_host = sum(1 for mid in holders if by_id[mid].host == active_host)
        assert same_host <= max(0, k - other_hosts), (t, holders)
        # rack-aware: a zone outage leaves a copy whenever another zone has a member
        active_zone = by_id[active[t]].zone
        if k and active_zone and any(r.zone and r.zone != active_zone for r in reports):
            assert any(by_id[mid].zone != active_zone for mid in holders), (t, holders)
        warmups += sum(1 for r in result.members.values() if t in r.warmup)
        # the core promise: where a warm copy exists, the task runs on one
        if any(caught_up(r, t, config) for r in reports):
            assert caught_up(by_id[active[t]], t, config), (t, active[t])
    assert warmups <= config.max_warmup_replicas
    if warmups:
        assert result.probing
    # what the operator shows: tasks whose failover would be a promotion right now
    assert result.coverage.tasks == len(stateful)
    assert result.coverage.with_standby == (len(stateful) if k else 0)
    assert result.coverage.caught_up == covered, (result.coverage, covered)
    if result.probing:
        # a probe is for a move still to come, or for a standby to report it caught up
        assert warmups or not balanced(result, reports) or covered < result.coverage.with_standby
    if all(caught_up(r, t, config) for r in reports for t in stateful):
        assert balanced(result, reports), active_counts(result)

    # sticky: a previous owner is not drained below its share, gives a task up only to a member
    # caught up for it (a standby promotion, nothing to restore), and only when none of the
    # tasks it was newly handed could have gone there instead (those have not started yet)
    claims = [t for r in reports for t in r.previous_active if t in owners]
    if len(claims) == len(set(claims)):
        share = len(active) // len(reports)
        for mid, roles in result.members.items():
            kept = by_id[mid].previous_active & set(owners)
            if not by_id[mid].draining:  # a draining member's share is nothing
                assert len(roles.active) >= min(len(kept), share), (mid, sorted(kept), sorted(roles.active))
            gained = roles.active - kept
            for t in kept - roles.active:
                to = by_id[active[t]]
                assert t not in stateful or caught_up(to, t, config), (t, mid, to.member_id)
                for x in gained:  # x could not go there: not caught up, or a staler copy than the one it got
                    assert x in stateful and (
                        not caught_up(to, x, config) or lag_of(to, x) > lag_of(by_id[mid], x)
                    ), (mid, "gave up", t, "kept", x)

    # determinism: the broker lists members in any order
    shuffled = list(reports)
    random.Random(len(reports) * 31 + len(active)).shuffle(shuffled)
    assert assign(shuffled, list(reversed(sorted(tasks))), list(stateful), config) == result


# ---------------------------------------------------------------- hand-picked scenarios

T8 = [TaskId(0, p) for p in range(8)]


def settled_three(standbys: int = 1) -> Group:
    group = Group(AssignorConfig(num_standby_replicas=standbys), list(T8), set(T8))
    for name in ("a", "b", "c"):
        group.join(name, f"pod-{name}")
    group.rebalance()
    group.settle()
    return group


def test_no_members_no_assignment() -> None:
    assert assign([], T8, T8, AssignorConfig()) == GroupAssignment(members={})


def test_fresh_group_is_balanced_with_one_standby_each() -> None:
    group = Group(AssignorConfig(num_standby_replicas=1), list(T8), set(T8))
    for name in ("a", "b", "c"):
        group.join(name, f"pod-{name}")
    result = group.rebalance()
    assert sorted(active_counts(result)) == [2, 3, 3]
    assert not any(r.warmup for r in result.members.values())  # nobody holds state: nothing to warm
    # but the new standbys are not caught up yet: a probing rebalance will count them again
    assert result.coverage == StandbyCoverage(tasks=8, with_standby=8, caught_up=0) and result.probing
    assert sum(len(r.standby) for r in result.members.values()) == 8


@pytest.mark.parametrize("dead", ["a-m", "b-m", "c-m"])
def test_a_dead_members_tasks_go_to_their_standbys(dead: str) -> None:
    group = settled_three()
    before = group.last
    assert before is not None
    standby_of = {t: mid for mid, r in before.members.items() for t in r.standby}
    owned = before.members[dead].active
    assert owned
    del group.members[dead]
    result = group.rebalance()
    for t in owned:
        assert t in result.members[standby_of[t]].active, t
    assert not any(r.warmup for r in result.members.values())  # the survivors hold everything: 4 and 4
    # the promoted tasks' new standbys start from nothing: a probe will count them caught up
    assert result.probing and result.coverage.caught_up < result.coverage.with_standby
    assert sorted(active_counts(result)) == [4, 4]


def test_co_located_processes_keep_standbys_off_their_host() -> None:
    tasks = [TaskId(0, p) for p in range(12)]
    group = Group(AssignorConfig(num_standby_replicas=1), tasks, set(tasks))
    for name, host in [("a", "pod-1"), ("b", "pod-1"), ("c", "pod-2"), ("d", "pod-2")]:
        group.join(name, host)
    group.rebalance()
    result = group.settle()
    hosts = {mid: s.host for mid, s in group.members.items()}
    for mid, roles in result.members.items():
        assert all(hosts[group.owner(t)] != hosts[mid] for t in roles.standby)
    # a whole pod dies: each of its tasks moves to the standby on the other pod, nothing restores
    standby_of = {t: mid for mid, r in result.members.items() for t in r.standby}
    lost = {t for mid in ("a-m", "b-m") for t in result.members[mid].active}
    del group.members["a-m"], group.members["b-m"]
    after = group.rebalance()
    for t in lost:
        assert t in after.members[standby_of[t]].active


def test_standbys_go_to_another_zone_and_a_zone_outage_promotes_every_orphan() -> None:
    """Six workers in three zones, one standby: every task's standby is in another zone than
    its active, so losing a whole zone moves each of its tasks to a standby, none restores."""
    tasks = [TaskId(0, p) for p in range(12)]
    group = Group(AssignorConfig(num_standby_replicas=1), tasks, set(tasks))
    for i in range(6):
        group.join(f"w{i}", f"node-{i}", zone=f"zone-{'abc'[i % 3]}")
    result = group.settle()
    zone = {mid: s.zone for mid, s in group.members.items()}
    standby_of = {t: mid for mid, r in result.members.items() for t in r.standby}
    for t in tasks:
        assert zone[standby_of[t]] != zone[group.owner(t)], t
    dead = [mid for mid, z in zone.items() if z == "zone-a"]
    orphans = {t for mid in dead for t in result.members[mid].active}
    for mid in dead:
        del group.members[mid]
    after = group.rebalance()
    for t in orphans:  # each taken over by its standby: a promotion, not a restore
        assert t in after.members[standby_of[t]].active, t


def test_zone_aware_standbys_stay_within_the_fair_share() -> None:
    """Placed task by task with the zone rule first, one worker kept three standbys and another
    one (the sticky ones it held before); when its zone went down the survivor holding the
    most copies could not take them all, and an orphan restored from scratch elsewhere
    (tests/integration/test_ha_zones.py). The same decision now evens out within the zones."""
    tasks = [TaskId(0, p) for p in range(12)]
    held_before = {2: [1, 11], 3: [4, 7, 10], 4: [0, 8], 5: [10]}
    reports = []
    for w in range(6):
        actives_here = frozenset(t for t in tasks if t.partition % 6 == w)
        standbys_here = frozenset(TaskId(0, p) for p in held_before.get(w, []))
        reports.append(
            MemberReport(
                f"m{w}",
                f"w{w}",
                f"node-{w}",
                dict.fromkeys(actives_here | standbys_here, 0),
                actives_here,
                standbys_here,
                zone="abc"[w // 2],
            )
        )
    result = assign(reports, tasks, set(tasks), AssignorConfig(num_standby_replicas=1))
    zone = {r.member_id: r.zone for r in reports}
    owner = {t: mid for mid, a in result.members.items() for t in a.active}
    assert sorted(len(a.standby) for a in result.members.values()) == [2] * 6
    for mid, a in result.members.items():
        for t in a.standby:
            assert zone[mid] != zone[owner[t]], (t, mid)


def test_two_standbys_on_two_hosts_share_the_actives_host_only_when_they_must() -> None:
    tasks = [TaskId(0, p) for p in range(6)]
    group = Group(AssignorConfig(num_standby_replicas=2), tasks, set(tasks))
    for name, host in [("a", "pod-1"), ("b", "pod-1"), ("c", "pod-2")]:
        group.join(name, host)
    result = group.rebalance()
    hosts = {mid: s.host for mid, s in group.members.items()}
    for t in tasks:
        holders = [mid for mid, r in result.members.items() if t in r.standby]
        other_host = sorted(hosts[h] != hosts[group.owner(t)] for h in holders)
        assert other_host == ([False, True] if hosts[group.owner(t)] == "pod-1" else [True, True])


def test_a_new_member_gets_warmups_not_actives() -> None:
    group = settled_three()
    before = actives(group.last or GroupAssignment({}))
    group.join("d", "pod-d")
    result = group.rebalance()
    assert result.members["d-m"].active == frozenset()
    assert len(result.members["d-m"].warmup) == 2  # max_warmup_replicas
    assert result.probing
    assert actives(result) == before  # nobody moved: the others are not caught up for each other's tasks
    group.tick()
    after = group.rebalance()
    assert after.members["d-m"].active == result.members["d-m"].warmup
    assert balanced(after) and not after.probing


def test_a_standby_on_the_new_member_is_its_warmup() -> None:
    """Two members, one standby: the newcomer must hold every standby, so it cannot hold warmups
    (roles are disjoint); the standbys warm it and the leader still probes."""
    group = Group(AssignorConfig(num_standby_replicas=1), list(T8), set(T8))
    group.join("a", "pod-a")
    group.rebalance()
    group.settle()
    group.join("b", "pod-b")
    result = group.rebalance()
    assert result.members["b-m"].standby == frozenset(T8)
    assert result.members["b-m"].warmup == frozenset()
    assert result.probing
    assert group.settle() is group.last
    assert sorted(active_counts(group.last)) == [4, 4]


def test_a_draining_member_hands_its_tasks_to_standby_holders_at_once() -> None:
    group = settled_three(standbys=1)
    leaving = group.members["c-m"]
    ran = group.last.members["c-m"].active if group.last else frozenset()
    assert ran
    leaving.draining = True
    result = group.rebalance()
    assert not result.members["c-m"].active  # nothing to warm up: the standbys were caught up
    for t in ran:
        assert t in group.members[group.owner(t)].roles.active
        assert caught_up(next(r for r in group.reports() if r.member_id == group.owner(t)), t, group.config)
    assert sorted(active_counts(result)) == [0, 4, 4]
    assert not any(r.warmup for r in result.members.values())


def test_a_draining_member_without_standbys_runs_its_tasks_until_warmups_caught_up() -> None:
    group = settled_three(standbys=0)
    ran = group.last.members["c-m"].active if group.last else frozenset()
    group.members["c-m"].draining = True
    first = group.rebalance()
    # nobody else holds its state: it keeps running what it ran, and others warm up
    assert first.members["c-m"].active == ran and first.probing
    assert {t for r in first.members.values() for t in r.warmup} <= ran
    settled = group.settle()
    assert not settled.members["c-m"].active
    assert sorted(active_counts(settled)) == [0, 4, 4]
    group.members["c-m"].draining = False  # the scale-in was cancelled: it takes its share again
    assert balanced(group.settle())


def test_a_drained_task_whose_standby_holder_is_full_warms_up_unless_the_changelog_is_short() -> None:
    """Both standbys of the draining member's tasks sit on m0, which has room for one more.

    The other task has no caught-up destination with room: it stays where it runs while m1
    warms it up, unless its changelog is shorter than acceptable.recovery.lag, which makes a
    member without state caught up (Kafka Streams' rule) and m1 takes it at once. The drain
    test on the broker met the second case on CI and now runs with a bound of 20.
    """
    t = [TaskId(0, p) for p in range(6)]
    a, b, c, d, e, f = t

    def reports() -> list[MemberReport]:
        return [
            MemberReport(
                "m0",
                "p0",
                "pod-0",
                {c: 0, d: 0, a: 2, b: 1, e: 300, f: 300},
                frozenset({c, d}),
                frozenset({a, b}),
            ),
            MemberReport(
                "m1",
                "p1",
                "pod-1",
                {e: 0, f: 0, c: 1, d: 1, a: 300, b: 300},
                frozenset({e, f}),
                frozenset({c, d}),
            ),
            MemberReport(
                "m2",
                "p2",
                "pod-2",
                {a: 0, b: 0, e: 1, f: 1, c: 300, d: 300},
                frozenset({a, b}),
                frozenset({e, f}),
                draining=True,
            ),
        ]

    bounded = AssignorConfig(num_standby_replicas=1, acceptable_recovery_lag=20)
    result = assign(reports(), t, t, bounded)
    check(reports(), t, t, bounded, result)
    assert result.members["m0"].active == {a, c, d}  # the freshest standby (a: lag 2) moves at once
    assert result.members["m2"].active == {b} and result.members["m1"].warmup == {b}
    assert result.probing

    short = AssignorConfig(num_standby_replicas=1, acceptable_recovery_lag=10_000)
    result = assign(reports(), t, t, short)
    check(reports(), t, t, short, result)
    assert not result.members["m2"].active
    assert result.members["m1"].active == {b, e, f} and not result.probing


def test_stateless_tasks_balance_freely_and_stick() -> None:
    tasks = [TaskId(1, p) for p in range(10)]
    reports = [
        MemberReport("m1", "p1", "h1", previous_active=frozenset(tasks)),
        MemberReport("m2", "p2", "h2"),
        MemberReport("m3", "p3", "h3"),
    ]
    result = assign(reports, tasks, [], AssignorConfig(num_standby_replicas=2, max_warmup_replicas=2))
    check(reports, tasks, [], AssignorConfig(num_standby_replicas=2), result)
    assert sorted(active_counts(result)) == [3, 3, 4]
    assert len(result.members["m1"].active) == 4  # the previous owner keeps what its share allows
    assert not result.probing
    assert all(not r.standby and not r.warmup for r in result.members.values())


def test_previous_owner_is_caught_up_whatever_it_reports_and_unknown_lag_is_no_state() -> None:
    t = TaskId(0, 0)
    config = AssignorConfig(acceptable_recovery_lag=10)
    reports = [
        MemberReport("m1", "p1", "h1", lags={t: 5_000}, previous_active=frozenset({t})),
        MemberReport("m2", "p2", "h2", lags={t: 0}),
    ]
    assert assign(reports, [t], [t], config).members["m1"].active == {t}
    reports = [
        MemberReport("m1", "p1", "h1", lags={t: UNKNOWN_LAG}),
        MemberReport("m2", "p2", "h2", lags={t: 9}),
    ]
    assert assign(reports, [t], [t], config).members["m2"].active == {t}
    # nobody caught up: the least lag wins over no state at all
    reports = [MemberReport("m1", "p1", "h1"), MemberReport("m2", "p2", "h2", lags={t: 500})]
    assert assign(reports, [t], [t], config).members["m2"].active == {t}


def test_an_orphan_moves_for_balance_before_a_running_task() -> None:
    """Found by ``GroupOverTime``: the orphan x goes to o (least lag), o is then one over, and u
    is caught up for both a and x; moving a would revoke a running task for nothing."""
    a, x = TaskId(0, 0), TaskId(0, 2)
    config = AssignorConfig(acceptable_recovery_lag=100)
    reports = [
        MemberReport("o", "o", "h1", lags={a: 0, x: 0}, previous_active=frozenset({a})),
        MemberReport("u", "u", "h2", lags={a: 0, x: 0}),
    ]
    result = assign(reports, [a, x], [a, x], config)
    check(reports, [a, x], [a, x], config, result)
    assert result.members["o"].active == {a} and result.members["u"].active == {x}


def test_an_orphan_stays_on_its_freshest_copy_and_a_running_task_makes_room() -> None:
    """Found on the real broker (6 workers, one standby, 5,000-record changelogs): a dead member's
    task went to its standby's holder, which was then one over, and the balance step moved the
    orphan on to a member with no state at all, "caught up" only because the whole changelog
    was shorter than acceptable.recovery.lag: a full restore where a promotion was at hand.
    An orphan now moves only to a copy at least as fresh; the holder's own running task a,
    whose standby u holds, moves instead (a promotion too)."""
    a, x = TaskId(0, 0), TaskId(0, 2)
    config = AssignorConfig(acceptable_recovery_lag=100)
    reports = [
        MemberReport("o", "o", "h1", lags={a: 0, x: 0}, previous_active=frozenset({a})),
        MemberReport("u", "u", "h2", lags={a: 0, x: 50}),
    ]
    result = assign(reports, [a, x], [a, x], config)
    check(reports, [a, x], [a, x], config, result)
    assert result.members["o"].active == {x} and result.members["u"].active == {a}


def test_two_claimants_of_one_task_yield_one_active() -> None:
    t = TaskId(0, 0)
    reports = [
        MemberReport("m2", "p2", "h2", previous_active=frozenset({t})),
        MemberReport("m1", "p1", "h1", previous_active=frozenset({t})),
    ]
    result = assign(reports, [t], [t], AssignorConfig(num_standby_replicas=1))
    check(reports, [t], [t], AssignorConfig(num_standby_replicas=1), result)
    assert result.members["m1"].active == {t} and result.members["m2"].standby == {t}


def test_same_group_same_answer_in_any_member_order() -> None:
    group = settled_three()
    group.join("d", "pod-a")
    reports = group.reports()
    expected = assign(reports, T8, T8, group.config)
    for seed in range(20):
        shuffled = list(reports)
        random.Random(seed).shuffle(shuffled)
        assert assign(shuffled, list(reversed(T8)), set(T8), group.config) == expected


def test_a_settled_group_stays_put() -> None:
    group = settled_three(standbys=2)
    before = group.last
    group.tick()
    assert group.rebalance() == before


def test_a_thousand_tasks_on_fifty_members() -> None:
    tasks = [TaskId(s, p) for s in range(4) for p in range(250)]
    stateful = tasks[:750]
    rnd = random.Random(7)
    reports = []
    for i in range(50):  # the worst case: everyone holds state for every task; five members are new
        mine = frozenset(t for j, t in enumerate(tasks) if j % 50 == i and i < 45)
        lags = {t: rnd.choice([0, 50, 20_000]) for t in stateful} if i < 45 else {}
        reports.append(MemberReport(f"m{i}", f"p{i}", f"h{i % 10}", lags=lags, previous_active=mine))
    config = AssignorConfig(num_standby_replicas=2)
    result = assign(reports, tasks, stateful, config)  # about 0.1 s here (measured, not asserted)
    check(reports, tasks, stateful, config, result)
    # the newcomers are filled with stateless tasks, which move for free
    assert balanced(result) and not any(r.warmup for r in result.members.values())
    assert all(not result.members[f"m{i}"].active & set(stateful) for i in range(45, 50))


# ---------------------------------------------------------------- the group over time

HOSTS = ["pod-0", "pod-1", "pod-2", "pod-3", "pod-4"]
# the hosts' zones: two zones of two hosts, one of one (``check`` holds standbys to other zones)
ZONES = {"pod-0": "zone-a", "pod-1": "zone-a", "pod-2": "zone-b", "pod-3": "zone-b", "pod-4": "zone-c"}


class GroupOverTime(RuleBasedStateMachine):
    """Members come and go, restart with or without their disk, time passes and the leader probes.

    ``check`` runs after every rebalance (one active per task, exact standby count off the
    active's host, disjoint roles, warmup budget, the caught-up promise, balance when all are
    caught up, stickiness, determinism); ``converge`` asserts that probing alone reaches
    balance without warmups, and that a settled group then stays put.

    What it found (runs of a few thousand examples; the fixes keep 24,000 more clean):

    * a member revoked a task it was running so that a caught-up standby elsewhere could take
      it for balance, while it kept an orphan it had just been handed (not yet started) that
      the same standby holder could have taken: balancing moved tasks in task order, now
      orphans go first. Reproduction: ``start(config=AssignorConfig(num_standby_replicas=1,
      acceptable_recovery_lag=100, max_warmup_replicas=1), partitions=[4, 0, 0],
      stateful_subs={0}, hosts=['pod-0', 'pod-0'])``, ``join('pod-0')``, ``converge()``,
      ``time_passes([1])``, ``restart(which=0, disk='kept')``, ``leave(which=1)``; pinned by
      ``test_an_orphan_moves_for_balance_before_a_running_task``.
    * a first, stricter stickiness check (a previous owner keeps all its tasks up to its share)
      failed: 3 members, one dies and its 3 tasks all go to the only holder of their standbys,
      which is then one over; the other survivor is caught up only for one of that holder's own
      tasks (its standby). Keeping the literal sticky target would leave the group unbalanced
      for a probing interval and restore an orphan as a warmup; promoting the standby balances
      at once with nothing to restore, which rule 4 allows. The check now says what the
      assignor promises: a previous owner is not drained below its share and gives a task up
      only to a member caught up for it, and only when no task newly handed to it could go
      there instead. Reproduction: ``start(config=AssignorConfig(1, 0, 1), partitions=[1, 6,
      0], stateful_subs={0, 1}, hosts=['pod-0', 'pod-0', 'pod-1'])``, ``converge()``,
      ``leave(which=0)``.
    * after the real broker showed orphans moved on from their standby holder to members with
      no state (see ``test_an_orphan_stays_on_its_freshest_copy_...``), a version that never
      moved an orphan to a staler copy left a group of two unbalanced ([2, 0]) with everybody
      caught up: 3,000 examples, ``start(config=AssignorConfig(num_standby_replicas=1,
      acceptable_recovery_lag=100, max_warmup_replicas=1), partitions=[0, 0, 0],
      stateful_subs=set(), hosts=['pod-0', 'pod-0'])``, then ``change_tasks(flip_stateful=True,
      partitions=2, sub=0)`` after some ``time_passes``. Balance moves now run in two passes:
      fresher-or-equal copies first, any caught-up member second.
    * the first evening of zone-aware standbys (paths from members above the fair share only,
      with the share still capping the task-by-task placement) was not a fixed point: a
      settled group's next rebalance moved standbys back (``converge``'s last assertion, in 2
      of 24 seeds of the 100-example run, 2026-11-28), e.g. ``start(config=AssignorConfig(2,
      0, 1), partitions=[4, 0, 7], stateful_subs={1, 2}, hosts=['pod-0', 'pod-0', 'pod-0',
      'pod-2'])``, ``join('pod-0')``, ``join('pod-4')``, ``change_tasks(flip_stateful=True,
      partitions=3, sub=0)``, ``join('pod-4')``, ``converge()``. Now previous holders keep
      their standbys past the share when zones are in play and the evening runs until no
      path is left (seeds 0-50 clean).
    * draining members (issue 49's scale-in): a first version ranked a draining member last
      for standbys before the zone and host rules, and ``check``'s zone rule failed at once
      (``start(config=AssignorConfig(1, 0, 1), partitions=[0, 0, 0], stateful_subs=set(),
      hosts=['pod-0', 'pod-0', 'pod-0'])``, ``change_tasks(flip_stateful=True, partitions=1,
      sub=0)``, ``join('pod-1')``, ``join('pod-2')``, ``leave(which=0)``, ``drain(on=True,
      which=3)``): a standby on a member about to go is worth less than one outside the
      active's zone only after the zone rules. Now it ranks after them (seeds 1-8 clean).
    """

    def __init__(self) -> None:
        super().__init__()
        self.group = Group(AssignorConfig(), [], set())
        self.partitions = [0, 0, 0]
        self.stateful_subs: set[int] = set()
        self.serial = 0
        self.ticked = False  # since the last rebalance

    def _rebalance(self) -> GroupAssignment:
        self.ticked = False
        return self.group.rebalance()

    def _set_tasks(self) -> None:
        self.group.tasks = [TaskId(s, p) for s, n in enumerate(self.partitions) for p in range(n)]
        self.group.stateful = {t for t in self.group.tasks if t.subtopology in self.stateful_subs}

    def _new_member(self, host: str, process: str | None = None) -> Sim:
        self.serial += 1
        return self.group.join(
            process or f"p{self.serial}", host, member_id=f"m{self.serial}", zone=ZONES[host]
        )

    @initialize(
        config=st.builds(
            AssignorConfig,
            num_standby_replicas=st.integers(0, 2),
            acceptable_recovery_lag=st.sampled_from([0, 100, 1_000, 10_000]),
            max_warmup_replicas=st.integers(1, 3),
        ),
        partitions=st.lists(st.integers(0, 8), min_size=3, max_size=3),
        stateful_subs=st.sets(st.integers(0, 2)),
        hosts=st.lists(st.sampled_from(HOSTS), min_size=2, max_size=5),
    )
    def start(
        self, config: AssignorConfig, partitions: list[int], stateful_subs: set[int], hosts: list[str]
    ) -> None:
        self.group.config = config
        self.partitions = partitions
        self.stateful_subs = stateful_subs
        self._set_tasks()
        for host in hosts:
            self._new_member(host)
        self._rebalance()

    @rule(host=st.sampled_from(HOSTS))
    def join(self, host: str) -> None:
        self._new_member(host)
        self._rebalance()

    @precondition(lambda self: len(self.group.members) > 1)
    @rule(which=st.integers(0, 10))
    def leave(self, which: int) -> None:
        mids = sorted(self.group.members)
        del self.group.members[mids[which % len(mids)]]
        self._rebalance()

    @rule(which=st.integers(0, 10), disk=st.sampled_from(["kept", "wiped", "unreadable"]))
    def restart(self, which: int, disk: str) -> None:
        """Same process (state dir), new member id, nothing running: only its lags speak for it."""
        mids = sorted(self.group.members)
        old = self.group.members.pop(mids[which % len(mids)])
        sim = self._new_member(old.host, process=old.process)
        if disk == "kept":
            sim.state = dict(old.state)
        elif disk == "unreadable":
            sim.state = dict.fromkeys(old.state, UNKNOWN_LAG)
        self._rebalance()

    @rule(which=st.integers(0, 10), on=st.booleans())
    def drain(self, which: int, on: bool) -> None:
        """The operator marks a member's Pod to go in a scale-in (or takes the mark back)."""
        mids = sorted(self.group.members)
        self.group.members[mids[which % len(mids)]].draining = on
        self._rebalance()

    @rule(stale=st.lists(st.integers(0, 300), min_size=1, max_size=4))
    def time_passes(self, stale: list[int]) -> None:
        self.group.tick(stale)
        self.ticked = True

    @rule()
    def probe(self) -> None:
        """Nobody joined or left: a balanced assignment without pending moves is kept as it is."""
        before = self.group.last
        unchanged = (
            before is not None
            and set(before.members) == set(self.group.members)
            and set(actives(before)) == set(self.group.tasks)
        )
        ticked = self.ticked
        result = self._rebalance()
        if unchanged and before is not None and balanced(before, self.group.reports()) and not before.probing:
            assert actives(result) == actives(before)
            if not ticked:  # the same lags too: the same standbys
                assert result == before

    @rule(sub=st.integers(0, 2), partitions=st.integers(0, 6), flip_stateful=st.booleans())
    def change_tasks(self, sub: int, partitions: int, flip_stateful: bool) -> None:
        self.partitions[sub] = partitions
        if flip_stateful:  # a new topology version; its stores start from the old tasks' changelogs
            self.stateful_subs ^= {sub}
        self._set_tasks()
        self._rebalance()

    @rule()
    def converge(self) -> None:
        bound = len(self.group.tasks) + 3
        for _ in range(bound):
            self.group.tick()
            result = self._rebalance()
            if not result.probing:
                break
        else:
            raise AssertionError(f"still probing after {bound} probing rebalances")
        assert balanced(result, self.group.reports()), active_counts(result)
        assert not any(r.warmup for r in result.members.values())
        self.group.tick()
        assert self._rebalance() == result  # settled: the same actives and standbys

    @invariant()
    def every_member_has_its_roles(self) -> None:
        if self.group.last is not None:
            assert set(self.group.last.members) == set(self.group.members)


GroupOverTime.TestCase.settings = settings(max_examples=100, stateful_step_count=30, deadline=None)
TestGroupOverTime = GroupOverTime.TestCase
