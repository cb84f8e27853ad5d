"""A model check of commit fencing: no commit from a member whose tasks moved is ever accepted.

Each member is two threads, as in the worker. The membership thread (kafka-python's client)
heartbeats, answers rebalances, runs the revocation listener with its bounded wait, leaves
the group when the processing thread is stuck past ``max.poll.interval.ms``, and sends
at-least-once commits. The processing thread applies the events the membership thread
queued (roles, assigned, revoked, lost), processes records, and commits: exactly-once
through a transaction whose commit may still be on its way to the broker when the group
moves on. The coordinator fences commits the way the broker does, by generation and member
id only, never by ownership. hypothesis interleaves: rebalances to any target (whatever a
leader decides, so leader changes are covered), revocations answered or timed out, stalls
and wake-ups of the processing thread, session expiries (a membership thread that stalled,
or a network cut) with or without kafka-python reporting the partitions lost, the liveness
leave and rejoin, processing, commits and their late delivery.

What the rules under test are: :mod:`baton.worker.assignment.fencing` (which identity a
commit names, when one is refused before it is sent, when a membership ended under held
partitions), the same functions ``Membership`` calls.

Invariants, checked at every commit the coordinator accepts: it starts where the partition's
committed offset is (nobody else committed the partition since this task began: exactly
once, "no commit from a member whose tasks moved"), it does not move the offset backward, and
its member owns the partition in the current generation. At the end, once everything
settles and the group rebalances cleanly, every member commits again (fencing never locks a
live member out).

What it found. With the rules before issue 43's fix restored in ``fencing.py`` (the
transactional commit named the live identity unless the member id had changed; at-least-once
commits were sent under the live identity unchecked), both machines fail within their
1,000 examples with ``--hypothesis-seed=0``, ``1`` and ``2`` (2026-11-28): exactly-once
``p0 committed by m0, owned by m1`` (seeds 0 and 2) and ``p0: a commit from 0 accepted at
committed offset 1`` (seed 1); at-least-once ``p1 committed by m0, owned by m1`` and
``p0 committed by m0, owned by m1``. The shrunk counterexample is the stall the issue
reproduced by hand against the broker, pinned below as
``test_a_thread_stalled_through_a_revocation_wakes_to_a_refused_commit``::

    member 0 processes p0; rebalance: p0 -> member 1; member 0's processing thread stalls;
    its revocation wait times out; generation 2; member 1 applies, processes, commits p0;
    member 0 wakes and commits p0 before its loop applies the revocation, under the live
    identity (generation 2, member 0) -> accepted although p0 is member 1's

With the rules as they are, no seed tried has failed (0-2 and the random seeds of every
unit-suite run since).

The longer run: ``BATON_MODEL_EXAMPLES=5000 pytest --timeout=0 tests/unit/worker/assignment/test_membership_model.py``
passed in 419 s on the 2-core dev machine (2026-11-28, niced, beside a full test run); the
unit suite runs 1,000 examples per guarantee (20-40 s).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from baton.worker.assignment.fencing import Identity, commit_identity, membership_ended, refused_before_send

pytestmark = pytest.mark.unit

PARTITIONS = (0, 1, 2)
INSTANCES = (0, 1, 2)


@dataclass
class Task:
    base: int  # the committed offset this task's uncommitted work starts from
    pos: int  # next record to process


@dataclass
class Commit:
    instance: int
    named: Identity
    offsets: dict[int, tuple[int, int]]  # partition -> (base, to)


@dataclass
class Revocation:
    partitions: frozenset[int]
    done: bool = False


@dataclass
class Instance:
    # the membership thread: kafka-python's client
    member: str | None  # None: out of the group
    generation: int = -1
    owned: set[int] = field(default_factory=set)  # what kafka-python counts as this member's
    revoking: Revocation | None = None
    left_for_stall: bool = False
    # the processing thread
    events: list[tuple[str, object]] = field(default_factory=list)
    held: Identity | None = None
    tasks: dict[int, Task] = field(default_factory=dict)
    stalled: bool = False
    inflight: Commit | None = None

    def live(self) -> Identity:
        return Identity(self.generation, self.member or "")


class FencingModel(RuleBasedStateMachine):
    exactly_once = True

    def __init__(self) -> None:
        super().__init__()
        self.ids = itertools.count()
        self.generation = 0
        self.members: dict[str, int] = {}  # member id -> instance
        self.assignment: dict[int, str] = {}  # partition -> member id, this generation
        self.committed = dict.fromkeys(PARTITIONS, 0)
        self.accepted = 0
        self.pending: dict[int, int] | None = None  # a rebalance's target: partition -> instance
        self.instances = [Instance(member=self._new_member(i)) for i in INSTANCES]
        self.pending = {p: p % len(INSTANCES) for p in PARTITIONS}
        self._complete()

    def _new_member(self, instance: int) -> str:
        member = f"m{next(self.ids)}"
        self.members[member] = instance
        return member

    # -- the coordinator ------------------------------------------------------------------
    def _deliver(self, commit: Commit) -> bool:
        """The broker's fencing: generation and member id, nothing else."""
        named = commit.named
        accepted = self.members.get(named.member) == commit.instance and named.generation == self.generation
        if not accepted:
            return False
        for p, (base, to) in commit.offsets.items():
            assert self.assignment.get(p) == named.member, (
                f"p{p} committed by {named.member}, owned by {self.assignment.get(p)}"
            )
            assert base == self.committed[p], (
                f"p{p}: a commit from {base} accepted at committed offset {self.committed[p]} "
                f"(records {min(base, self.committed[p])}..{max(base, self.committed[p])} twice or never)"
            )
            assert to >= self.committed[p], f"p{p}: committed offset moved back to {to}"
            self.committed[p] = to
        self.accepted += 1
        return True

    def _settle(self, i: int, commit: Commit) -> None:
        """The processing thread learns the outcome: forget or rewind."""
        inst = self.instances[i]
        ok = self._deliver(commit)
        for p, (_base, to) in commit.offsets.items():
            task = inst.tasks.get(p)
            if task is None:
                continue
            if ok:
                task.base = to
            else:
                task.pos = task.base
        if not ok:  # a failed transaction drops every task's uncommitted work
            for task in inst.tasks.values():
                task.pos = task.base

    def _complete(self) -> None:
        """SyncGroup: a new generation with the target (partitions of departed members unassigned)."""
        assert self.pending is not None
        self.generation += 1
        target = self.pending
        self.pending = None
        self.assignment = {}
        for p, i in target.items():
            member = self.instances[i].member
            if member is not None and member in self.members:
                self.assignment[p] = member
        for inst in self.instances:
            if inst.member is None or inst.member not in self.members:
                continue
            inst.generation = self.generation
            now = {p for p, m in self.assignment.items() if m == inst.member}
            lost: set[int] = set()
            if inst.owned and membership_ended(inst.held, inst.member):  # Membership._lost_with_membership
                lost = set(inst.owned)
                inst.events.append(("lost", frozenset(lost)))
            inst.events.append(("roles", (Identity(self.generation, inst.member), frozenset(now))))
            regained = now & lost
            if regained:
                inst.events.append(("assigned", frozenset(regained)))
            new = now - inst.owned
            if new:
                inst.events.append(("assigned", frozenset(new)))
            inst.owned = now

    # -- the processing thread -----------------------------------------------------------------
    def _commit(self, i: int) -> Commit | None:
        inst = self.instances[i]
        offsets = {p: (t.base, t.pos) for p, t in inst.tasks.items() if t.pos > t.base}
        if not offsets:
            return None
        if self.exactly_once:  # the transaction names Membership.group_metadata()
            return Commit(i, commit_identity(inst.held, inst.live()), offsets)
        # at-least-once goes through the membership thread (Membership._run_commits)
        if inst.member is None or refused_before_send(inst.held, inst.live()):
            for task in inst.tasks.values():
                task.pos = task.base
            return None
        return Commit(i, inst.live(), offsets)

    def _apply(self, i: int) -> None:
        inst = self.instances[i]
        while inst.events:
            kind, payload = inst.events.pop(0)
            if kind == "roles":
                assert isinstance(payload, tuple)
                inst.held = payload[0]  # Membership.applied
            elif kind == "assigned":
                assert isinstance(payload, frozenset)
                for p in payload:
                    inst.tasks[p] = Task(self.committed[p], self.committed[p])
            elif kind == "revoked":  # commit, then close (Worker._on_revoke)
                assert isinstance(payload, Revocation)
                if inst.inflight is not None:
                    self._settle(i, inst.inflight)
                    inst.inflight = None
                commit = self._commit(i)
                if commit is not None:
                    self._settle(i, commit)
                for p in payload.partitions:
                    inst.tasks.pop(p, None)
                payload.done = True
            elif kind == "lost":  # abort, rewind the rest, drop (Worker._on_lost)
                assert isinstance(payload, frozenset)
                for task in inst.tasks.values():
                    task.pos = task.base
                for p in payload:
                    inst.tasks.pop(p, None)

    # -- what each thread can do now ----------------------------------------------------------
    # Every rule acts on a member drawn from those it is enabled for, so no step is wasted:
    # the stall that matters takes a dozen precise steps.
    def _awake(self, i: int) -> bool:
        return not self.instances[i].stalled

    def _can_stall(self, i: int) -> bool:
        return not self.instances[i].stalled

    def _can_wake(self, i: int) -> bool:
        return self.instances[i].stalled

    def _can_process(self, i: int) -> bool:
        return self._awake(i) and bool(self.instances[i].tasks)

    def _can_apply(self, i: int) -> bool:
        return self._awake(i) and bool(self.instances[i].events)

    def _can_commit(self, i: int) -> bool:
        inst = self.instances[i]
        return self._awake(i) and inst.inflight is None and any(t.pos > t.base for t in inst.tasks.values())

    def _can_deliver(self, i: int) -> bool:
        return self.instances[i].inflight is not None

    def _can_finish_revocation(self, i: int) -> bool:
        return self.instances[i].revoking is not None

    def _in_group(self, i: int) -> bool:
        inst = self.instances[i]
        return inst.member is not None and inst.member in self.members

    def _can_leave(self, i: int) -> bool:
        return self.instances[i].stalled and self.instances[i].member is not None

    def _can_rejoin(self, i: int) -> bool:
        return self.instances[i].left_for_stall and self._awake(i)

    def _pick(self, data: st.DataObject, enabled: Callable[[FencingModel, int], bool]) -> int:
        i: int = data.draw(st.sampled_from([i for i in INSTANCES if enabled(self, i)]))
        return i

    # -- rules ----------------------------------------------------------------------------------
    @precondition(lambda self: _any(self, FencingModel._can_stall))
    @rule(data=st.data())
    def stall_rule(self, data: st.DataObject) -> None:
        self.instances[self._pick(data, FencingModel._can_stall)].stalled = True

    @precondition(lambda self: _any(self, FencingModel._can_wake))
    @rule(data=st.data())
    def wake_rule(self, data: st.DataObject) -> None:
        self.wake(self._pick(data, FencingModel._can_wake))

    @precondition(lambda self: _any(self, FencingModel._can_process))
    @rule(data=st.data(), n=st.integers(1, 3))
    def process_rule(self, data: st.DataObject, n: int) -> None:
        self.process(self._pick(data, FencingModel._can_process), n)

    @precondition(lambda self: _any(self, FencingModel._can_apply))
    @rule(data=st.data())
    def apply_rule(self, data: st.DataObject) -> None:
        self._apply(self._pick(data, FencingModel._can_apply))

    @precondition(lambda self: _any(self, FencingModel._can_commit))
    @rule(data=st.data())
    def commit_rule(self, data: st.DataObject) -> None:
        self.commit(self._pick(data, FencingModel._can_commit))

    @precondition(lambda self: _any(self, FencingModel._can_deliver))
    @rule(data=st.data())
    def deliver_rule(self, data: st.DataObject) -> None:
        """The broker answers a transaction (also one sent before a stall: the thread learns
        the outcome later, which changes nothing here)."""
        self.deliver(self._pick(data, FencingModel._can_deliver))

    @precondition(lambda self: self.pending is None)
    @rule(owners=st.lists(st.sampled_from(INSTANCES), min_size=len(PARTITIONS), max_size=len(PARTITIONS)))
    def begin_rebalance(self, owners: list[int]) -> None:
        """A leader's decision; members losing partitions run their revocation listener."""
        self.pending = dict(zip(PARTITIONS, owners, strict=True))
        for i, inst in enumerate(self.instances):
            if not self._in_group(i) or inst.revoking is not None:
                continue
            revoke = frozenset(p for p in inst.owned if self.pending[p] != i)
            if revoke:
                inst.revoking = Revocation(revoke)
                inst.events.append(("revoked", inst.revoking))

    @precondition(lambda self: _any(self, FencingModel._can_finish_revocation))
    @rule(data=st.data(), timed_out=st.booleans())
    def finish_revocation_rule(self, data: st.DataObject, timed_out: bool) -> None:
        self.finish_revocation(self._pick(data, FencingModel._can_finish_revocation), timed_out)

    @precondition(lambda self: self.pending is not None)
    @rule()
    def complete_rebalance(self) -> None:
        if any(inst.revoking is not None and self._in_group(i) for i, inst in enumerate(self.instances)):
            return  # the coordinator waits for every member's JoinGroup
        self._complete()

    @precondition(lambda self: _any(self, FencingModel._in_group))
    @rule(data=st.data(), reports_lost=st.booleans())
    def session_expires(self, data: st.DataObject, reports_lost: bool) -> None:
        """The coordinator removes the member (no heartbeat for a session: its membership
        thread stalled, or the network); it joins again under a new member id, kafka-python
        reporting its partitions lost, or not (removed mid-rebalance)."""
        i = self._pick(data, FencingModel._in_group)
        inst = self.instances[i]
        self._remove(inst)
        if reports_lost and inst.owned:
            inst.events.append(("lost", frozenset(inst.owned)))
            inst.owned = set()
        inst.member = self._new_member(i)

    @precondition(lambda self: _any(self, FencingModel._can_leave))
    @rule(data=st.data())
    def leave_for_stall(self, data: st.DataObject) -> None:
        """Membership._leave_while_stalled: the processing thread is stuck past max.poll.interval.ms."""
        inst = self.instances[self._pick(data, FencingModel._can_leave)]
        if inst.owned:
            inst.events.append(("lost", frozenset(inst.owned)))
            inst.owned = set()
        self._remove(inst)
        inst.member, inst.left_for_stall = None, True

    @precondition(lambda self: _any(self, FencingModel._can_rejoin))
    @rule(data=st.data())
    def rejoin_rule(self, data: st.DataObject) -> None:
        self.rejoin_after_stall(self._pick(data, FencingModel._can_rejoin))

    # -- the same steps by hand (teardown, the pinned scenarios) ------------------------------
    def _remove(self, inst: Instance) -> None:
        assert inst.member is not None
        self.members.pop(inst.member, None)
        for p in [p for p, m in self.assignment.items() if m == inst.member]:
            del self.assignment[p]
        inst.revoking = None
        inst.generation = -1

    def stall(self, i: int) -> None:
        self.instances[i].stalled = True

    def wake(self, i: int) -> None:
        self.instances[i].stalled = False

    def process(self, i: int, n: int) -> None:
        for task in self.instances[i].tasks.values():
            task.pos += n

    def commit(self, i: int) -> None:
        inst = self.instances[i]
        if inst.inflight is not None:
            return
        commit = self._commit(i)
        if commit is None:
            return
        if self.exactly_once:
            inst.inflight = commit  # pipelined: on its way while the loop goes on
        else:
            self._settle(i, commit)  # kafka-python's commit is synchronous on the membership thread

    def deliver(self, i: int) -> None:
        inst = self.instances[i]
        if inst.inflight is not None:
            commit, inst.inflight = inst.inflight, None
            self._settle(i, commit)

    def finish_revocation(self, i: int, timed_out: bool) -> None:
        """The listener returns once the processing thread released the tasks, or after its wait."""
        inst = self.instances[i]
        if inst.revoking is None or not (inst.revoking.done or timed_out):
            return
        inst.owned -= inst.revoking.partitions
        inst.revoking = None

    def rejoin_after_stall(self, i: int) -> None:
        inst = self.instances[i]
        if inst.left_for_stall:
            inst.left_for_stall = False
            inst.member = self._new_member(i)

    def teardown(self) -> None:
        """Everything settles and the group rebalances cleanly: every member commits again."""
        for inst in self.instances:
            inst.stalled = False
        for i in INSTANCES:
            self.rejoin_after_stall(i)
            self.deliver(i)
        for _ in range(2):
            if self.pending is None:
                self.begin_rebalance([p % len(INSTANCES) for p in PARTITIONS])
            for i in INSTANCES:
                self._apply(i)
                self.finish_revocation(i, timed_out=False)
            self.complete_rebalance()
            assert self.pending is None
        for i in INSTANCES:
            self._apply(i)
        before = self.accepted
        for i in INSTANCES:
            self.process(i, 1)
            self.commit(i)
            self.deliver(i)
        assert self.accepted - before == len(INSTANCES), (
            "a live member's commit was refused after a clean rebalance"
        )


def _any(model: FencingModel, enabled: Callable[[FencingModel, int], bool]) -> bool:
    return any(enabled(model, i) for i in INSTANCES)


class AtLeastOnceFencingModel(FencingModel):
    exactly_once = False


_SETTINGS = settings(
    max_examples=int(os.environ.get("BATON_MODEL_EXAMPLES", "1000")),
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
TestExactlyOnceFencing = FencingModel.TestCase
TestExactlyOnceFencing.settings = _SETTINGS
TestAtLeastOnceFencing = AtLeastOnceFencingModel.TestCase
TestAtLeastOnceFencing.settings = _SETTINGS


@pytest.mark.parametrize("model", [FencingModel, AtLeastOnceFencingModel])
def test_a_thread_stalled_through_a_revocation_wakes_to_a_refused_commit(model: type[FencingModel]) -> None:
    """Issue 43's reproduction, step by step: the shrunk counterexample of the old rule."""
    m = model()
    for i in INSTANCES:
        m._apply(i)
    m.process(0, 2)  # member 0 holds p0 with work not committed yet
    m.begin_rebalance([1, 1, 2])  # p0 moves to member 1
    m.stall(0)  # in user code: the revocation waits for it, then times out
    m.finish_revocation(0, timed_out=True)
    m.complete_rebalance()
    m._apply(1)
    m.process(1, 3)
    m.commit(1)
    m.deliver(1)
    assert m.committed[0] == 3
    m.wake(0)
    m.commit(0)  # before its loop applies the revocation: names generation 1
    m.deliver(0)
    assert m.committed[0] == 3 and m.instances[0].tasks[0].pos == 0  # refused, rewound
    m._apply(0)
    assert 0 not in m.instances[0].tasks
