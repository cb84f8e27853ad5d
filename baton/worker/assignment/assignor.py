"""Baton's task assignor, run by the group leader on every rebalance (pure, deterministic).

Modelled on Kafka Streams' HighAvailabilityTaskAssignor (KIP-441). The promise it keeps: a
stateful task goes to a member that already holds its state (its previous owner, or a
standby that is caught up) whenever such a member exists, even when that leaves the group
unbalanced. Balance is reached later and without downtime: the member that should own the
task gets a *warmup* (a standby in all but name), the leader asks for a probing rebalance,
and once the warmup has caught up the task moves to it like a standby promotion.

Only the leader runs it, but leadership moves, and the broker lists members in any order:
for the same reports any leader must decide the same, or tasks would move for nothing. So
members are taken in (process, member_id) order and tasks in task order, never in the order
of a set or of an input mapping.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence

from baton.worker.assignment.model import (
    AssignorConfig,
    GroupAssignment,
    MemberAssignment,
    MemberReport,
    StandbyCoverage,
)
from baton.worker.naming import TaskId

NO_STATE = sys.maxsize  # the lag of a member that would restore a task from scratch: worse than any lag


def assign(
    members: Sequence[MemberReport],
    tasks: Collection[TaskId],
    stateful: Collection[TaskId],
    config: AssignorConfig,
) -> GroupAssignment:
    """Place every task's active, its standbys and the warmups that move the group towards balance.

    Actives first (where the state is, then balance within what state allows), then
    standbys (they depend on where each active is), then warmups for the moves that balance
    wants but state forbids for now (a balance target that already holds a standby needs no
    warmup: the standby warms it).
    """
    if not members:
        return GroupAssignment(members={})
    plan = _Plan(sorted(members, key=lambda m: (m.process, m.member_id)), tasks, stateful, config)
    plan.place_actives()
    plan.place_standbys()
    probing = plan.place_warmups()
    coverage = plan.coverage()
    probing = probing or coverage.caught_up < coverage.with_standby
    return GroupAssignment(members=plan.result(), probing=probing, coverage=coverage)


def _unwind(came: dict[int, tuple[int, TaskId] | None], end: int) -> list[tuple[int, int, TaskId]]:
    """The hops of a breadth-first search, first to last."""
    hops: list[tuple[int, int, TaskId]] = []
    v = end
    while (step := came[v]) is not None:
        u, t = step
        hops.append((u, v, t))
        v = u
    return hops[::-1]


class _Plan:
    """The working state of one assignment; members are referred to by their index in sorted order."""

    def __init__(
        self,
        members: list[MemberReport],
        tasks: Collection[TaskId],
        stateful: Collection[TaskId],
        config: AssignorConfig,
    ) -> None:
        self.members = members
        self.n = len(members)
        self.config = config
        self.tasks = sorted(set(tasks))
        task_set = set(self.tasks)
        self.stateful = {t for t in stateful if t in task_set}
        self.stateful_tasks = [t for t in self.tasks if t in self.stateful]
        # lag[i][t]: records behind for a stateful task member i holds state for; a previous
        # owner counts as fully caught up whatever it reported (it ran the task until now)
        self.lag: list[dict[TaskId, int]] = []
        for m in members:
            lags = {t: v for t, v in m.lags.items() if t in self.stateful and v >= 0}
            lags.update((t, 0) for t in m.previous_active if t in self.stateful)
            self.lag.append(lags)
        # caught[t]: the members that could run t at once, in member order
        self.caught: dict[TaskId, list[int]] = {}
        for i, lags in enumerate(self.lag):
            for t, v in lags.items():
                if v <= config.acceptable_recovery_lag:
                    self.caught.setdefault(t, []).append(i)
        self.owner: dict[TaskId, int] = {}
        self.previous: dict[TaskId, int] = {}  # the task's previous owner, when it is still a member
        self.count = [0] * self.n
        self.cap = [0] * self.n
        self.standby: list[set[TaskId]] = [set() for _ in members]
        # rack-aware (KIP-708): zones rank before the fair share in standby placement, which
        # then needs evening out (_even_out_standbys)
        self.zoned = any(m.zone for m in members)
        # the members that stay; all of them when every member drains (nowhere else to go)
        self.staying = [i for i, m in enumerate(members) if not m.draining] or list(range(self.n))
        self.leaving = set(range(self.n)) - set(self.staying)
        self.warmup: list[set[TaskId]] = [set() for _ in members]

    def lag_of(self, i: int, t: TaskId) -> int:
        return self.lag[i].get(t, NO_STATE)

    def is_caught_up(self, i: int, t: TaskId) -> bool:
        return self.lag_of(i, t) <= self.config.acceptable_recovery_lag

    def _give(self, t: TaskId, i: int) -> None:
        old = self.owner.get(t)
        if old is not None:
            self.count[old] -= 1
        self.owner[t] = i
        self.count[i] += 1

    def place_actives(self) -> None:
        """Where the state is first, then the balancing moves that need no restore.

        Tasks that keep their previous owner are counted before orphans are placed, so that
        "fewest actives" among an orphan's candidates sees the real load.
        """
        task_set = set(self.tasks)
        for i, m in enumerate(self.members):
            for t in m.previous_active:
                if t in task_set:
                    self.previous.setdefault(t, i)  # two claimants (a zombie): the first in member order
        for t in self.tasks:
            if t in self.previous:
                self._give(t, self.previous[t])
        for t in self.stateful_tasks:
            if t not in self.owner:
                candidates = self.caught.get(t) or range(self.n)
                self._give(t, min(candidates, key=lambda i: (self.lag_of(i, t), self.count[i], i)))

        # the balanced target: counts differ by at most one; members that own more keep more.
        # A draining member (its Pod goes in a scale-in) has room for none: what it runs is
        # over its target, so it moves the way balance moves tasks, to caught-up members at
        # once and to warmups otherwise, while the draining member keeps running it
        base, extra = divmod(len(self.tasks), len(self.staying))
        self.cap = [0] * self.n
        for i in self.staying:
            self.cap[i] = base
        for i in sorted(self.staying, key=lambda i: (-self.count[i], i))[:extra]:
            self.cap[i] += 1

        self._move_to_caught_up()
        self._place_stateless()
        self._move_without_caught_up()

    def _over(self, i: int) -> bool:
        return self.count[i] > self.cap[i]

    def _under(self, i: int) -> bool:
        return self.count[i] < self.cap[i]

    def _move_to_caught_up(self) -> None:
        """Moves from an overloaded member to an underloaded one that is caught up: free, like a promotion.

        Two passes. The first moves a task only to a copy at least as fresh as where it is
        (a running task: a standby at lag 0; an orphan: a copy no staler than its least-lag
        holder), so a dead member's task is promoted from its standby and a running task
        whose standby is current makes room. Only what that cannot balance moves in the
        second pass to any caught-up member ("caught up" may mean a member with no state at
        all while the changelog is shorter than acceptable.recovery.lag): without the first
        pass, an orphan and a running task could swap members for no gain, and every swap is
        a revocation. Within a pass orphans go first (they have not started yet), then the
        tasks with the fewest destinations, so a flexible task does not take the only
        destination of another one (which would then need a warmup).
        """
        for fresh_only in (True, False):
            options: list[tuple[bool, int, TaskId, list[int]]] = []
            for t in self.stateful_tasks:
                o = self.owner[t]
                if self._over(o):
                    dests = [u for u in self.caught.get(t, ()) if self._under(u)]
                    if fresh_only:
                        dests = [u for u in dests if self.lag_of(u, t) <= self.lag_of(o, t)]
                    if dests:
                        options.append((self.previous.get(t) == o, len(dests), t, dests))
            options.sort(key=lambda o: o[:3])
            for _, _, t, dests in options:
                if not self._over(self.owner[t]):
                    continue
                live = [u for u in dests if self._under(u)]
                if live:
                    self._give(
                        t, min(live, key=lambda u: (self.lag_of(u, t), self.count[u] - self.cap[u], u))
                    )

    def _most_under(self) -> int:
        return min(range(self.n), key=lambda u: (self.count[u] - self.cap[u], u))

    def _place_stateless(self) -> None:
        """Stateless tasks have nothing to restore: new ones fill the emptiest members, and an
        overloaded member sheds its stateless tasks before anyone restores state for balance."""
        for t in self.tasks:
            if t not in self.owner:  # stateless without a surviving previous owner
                self._give(t, self._most_under())  # there is always room: caps sum to the task count
        by_member: list[list[TaskId]] = [[] for _ in self.members]
        for t in self.tasks:
            if t not in self.stateful:
                by_member[self.owner[t]].append(t)
        for o in range(self.n):
            while self._over(o) and by_member[o]:
                u = self._most_under()
                if not self._under(u):
                    return
                self._give(by_member[o].pop(), u)

    def _move_without_caught_up(self) -> None:
        """A stateful task nobody is caught up for restores wherever it goes: balance decides,
        with the least lag among the members that have room."""
        for t in self.stateful_tasks:
            o = self.owner[t]
            if not self._over(o) or t in self.caught:
                continue
            under = [u for u in range(self.n) if self._under(u)]
            if not under:
                return
            self._give(t, min(under, key=lambda u: (self.lag_of(u, t), self.count[u] - self.cap[u], u)))

    def place_standbys(self) -> None:
        """A standby in the active's zone dies with it in a zone outage, and one on its host
        with the host, so other zones, then other hosts come first (Kafka Streams' rack-aware
        standbys, KIP-708); among them, members below their fair share of standbys, then
        members that can take over at once, and the previous holders (sticky), then zones and
        hosts that hold no other copy of the task, then the least loaded. With zones, a
        previous holder keeps its standby past the fair share, and ``_even_out_standbys``
        balances afterwards: the result is then its own fixed point (the next rebalance with
        the same actives keeps it), which a cap inside the task-by-task placement is not."""
        k = min(self.config.num_standby_replicas, self.n - 1)
        if k <= 0:
            return
        sb_count = [0] * self.n
        # stickiness and freshness stop at a fair share: otherwise the members that were
        # there first keep every standby as the group grows
        sb_cap = -(-len(self.stateful_tasks) * k // len(self.staying))
        for t in self.stateful_tasks:
            a = self.owner[t]
            active = self.members[a]
            chosen: list[int] = []
            hosts: set[str] = set()
            zones: set[str] = {active.zone} if active.zone else set()
            for _ in range(k):
                ranks = (
                    self._standby_rank(u, t, active.host, (hosts, zones), sb_count=sb_count, sb_cap=sb_cap)
                    for u in range(self.n)
                    if u != a and u not in chosen
                )
                u = min(ranks)[-1]
                chosen.append(u)
                hosts.add(self.members[u].host)
                if self.members[u].zone:
                    zones.add(self.members[u].zone)
                self.standby[u].add(t)
                sb_count[u] += 1
        if self.zoned:
            self._even_out_standbys(sb_count)

    def _even_out_standbys(self, sb_count: list[int]) -> None:
        """Even out standbys along chains of moves that keep every copy's zone and host rank.

        Placed task by task with the zone rule first, one worker could hold three standbys and
        another one (6 workers, 3 zones, 12 tasks: 40 % of random placements); when the first
        one's zone peers died, the survivor holding the most copies took fewer tasks than it
        held copies of, and an orphan went to a member without state, which restored it from
        scratch (tests/integration/test_ha_zones.py). A breadth-first path from a member to
        one holding at least two standbys fewer moves one standby per hop, until no such path
        is left: a fixed point, so a rebalance that changes nothing moves nothing (the
        group-over-time model found the oscillation of a version that stopped earlier). Where
        zones make an even spread impossible (with two standbys in three zones, each zone
        holds a copy of every task active elsewhere) it evens out within each zone. 1,000
        tasks on 100 workers with two standbys: 0.4 s.
        """
        holders: dict[TaskId, set[int]] = {}
        for u, tasks in enumerate(self.standby):
            for t in tasks:
                holders.setdefault(t, set()).add(u)
        by_zone: dict[str, set[int]] = {}
        for u, m in enumerate(self.members):
            by_zone.setdefault(m.zone, set()).add(u)
        stuck: set[int] = set()
        while True:
            low = min(sb_count[u] for u in self.staying)
            over = [u for u in range(self.n) if sb_count[u] >= low + 2 and u not in stuck]
            if not over:
                return
            start = max(over, key=lambda i: (sb_count[i], -i))
            path = self._standby_path(start, sb_count, holders, by_zone)
            if path is None:
                stuck.add(start)
                continue
            stuck.clear()  # a move may open a path for them: the result must be a fixed point
            for a, b, t in path:
                self.standby[a].discard(t)
                self.standby[b].add(t)
                holders[t].discard(a)
                holders[t].add(b)
            sb_count[start] -= 1
            sb_count[path[-1][1]] += 1

    def _standby_path(
        self,
        start: int,
        sb_count: list[int],
        holders: dict[TaskId, set[int]],
        by_zone: dict[str, set[int]],
    ) -> list[tuple[int, int, TaskId]] | None:
        """Breadth first from ``start``: (from, to, task) hops ending at a member with at least
        two standbys fewer, none putting its task's copy in a zone (or on the active's host)
        that holds a copy already when the copy it moves did not."""
        came: dict[int, tuple[int, TaskId] | None] = {start: None}
        unseen = set(range(self.n)) - {start}
        frontier = [start]
        while frontier and unseen:
            nxt: list[int] = []
            for u in frontier:
                on_path = {t for _u, _v, t in _unwind(came, u)}  # a task moves once per path
                for t in sorted(self.standby[u] - on_path):
                    a = self.owner[t]
                    active_host = self.members[a].host
                    copies = [h for h in holders[t] if h != u]
                    taken = {self.members[a].zone} | {self.members[h].zone for h in copies}
                    taken.discard("")
                    # hosts the copy must not move onto: the active's, and those of the task's
                    # other copies, unless it sits on one already (no hop ranks worse)
                    copy_hosts = {self.members[h].host for h in copies}
                    host = self.members[u].host
                    avoid = ({active_host} if host != active_host else set()) | (
                        copy_hosts if host not in copy_hosts else set()
                    )
                    zone = self.members[u].zone
                    if zone and zone in taken:
                        allowed = unseen  # shares a zone already: anywhere is no worse
                    else:
                        allowed = set().union(*(ms for z, ms in by_zone.items() if z not in taken)) & unseen
                    for v in sorted(allowed - holders[t] - {a}):
                        if self.members[v].host in avoid or v in self.leaving:
                            continue
                        came[v] = (u, t)
                        unseen.discard(v)
                        if sb_count[v] <= sb_count[start] - 2:
                            return _unwind(came, v)
                        nxt.append(v)
            frontier = nxt
        return None

    def _standby_rank(
        self,
        u: int,
        t: TaskId,
        active_host: str,
        taken: tuple[set[str], set[str]],
        *,
        sb_count: list[int],
        sb_cap: int,
    ) -> tuple[bool, bool, bool, bool, bool, bool, bool, int, int, int]:
        """Ends with ``u``: the best rank names the member. ``taken``: the hosts and zones that
        hold a copy of the task already (the active's zone among them). After the zone and
        host rules, a draining member comes last: its copy goes with its Pod."""
        m = self.members[u]
        hosts, zones = taken
        return (
            bool(m.zone) and m.zone in zones,
            m.host == active_host,
            u in self.leaving,
            sb_count[u] >= sb_cap and not (self.zoned and t in m.previous_standby),
            not self.is_caught_up(u, t),
            t not in m.previous_standby,
            m.host in hosts,
            self.lag_of(u, t),
            sb_count[u],
            u,
        )

    def place_warmups(self) -> bool:
        """The moves balance still wants, kept as targets that warm up: returns whether to probe.

        A target already holding a standby for the task needs no warmup (roles are disjoint
        per task) but still needs the probing rebalance that moves the task once it caught
        up. Targets with some state go first: the warmups of the last probing rebalance stay
        where they are and finish.
        """
        vcount = list(self.count)
        budget = self.config.max_warmup_replicas
        pending = False
        movable: list[tuple[int, TaskId]] = []
        under = [u for u in range(self.n) if vcount[u] < self.cap[u]]
        if not under:
            return False
        for t in self.stateful_tasks:
            if vcount[self.owner[t]] > self.cap[self.owner[t]]:
                movable.append((min(self.lag_of(u, t) for u in under), t))
        movable.sort()
        for _, t in movable:
            o = self.owner[t]
            if vcount[o] <= self.cap[o]:
                continue
            under = [u for u in range(self.n) if vcount[u] < self.cap[u]]
            if not under:
                break
            if budget <= 0:
                under = [u for u in under if t in self.standby[u]]
                if not under:
                    continue
            u = min(
                under,
                key=lambda u: (self.lag_of(u, t), t not in self.standby[u], vcount[u] - self.cap[u], u),
            )
            if t in self.standby[u]:
                pending = True
            else:
                self.warmup[u].add(t)
                budget -= 1
            vcount[o] -= 1
            vcount[u] += 1
        return pending or any(self.warmup)

    def coverage(self) -> StandbyCoverage:
        holders = {t: [u for u in range(self.n) if t in self.standby[u]] for t in self.stateful_tasks}
        return StandbyCoverage(
            tasks=len(self.stateful_tasks),
            with_standby=sum(1 for us in holders.values() if us),
            caught_up=sum(1 for t, us in holders.items() if any(self.is_caught_up(u, t) for u in us)),
        )

    def result(self) -> dict[str, MemberAssignment]:
        active: list[set[TaskId]] = [set() for _ in self.members]
        for t, i in self.owner.items():
            active[i].add(t)
        return {
            m.member_id: MemberAssignment(
                active=frozenset(active[i]),
                standby=frozenset(self.standby[i]),
                warmup=frozenset(self.warmup[i]),
            )
            for i, m in enumerate(self.members)
        }
