"""Which group identity a commit names, and when a commit is refused before it is sent.

Two threads share one member. The membership thread heartbeats and answers rebalances;
the processing thread holds the tasks and commits their work. The broker fences an offset
commit by generation and member id only, not by who owns the partition, so a commit must
name the identity under which the *processing thread* last applied its assignment (the
*held* identity), never the membership thread's live one: the two differ exactly when the
group moved on while the processing thread was away (stalled in user code past a
revocation's wait, or its member removed and joined again), and then the tasks it still
holds may already belong to another member. ``tests/unit/worker/assignment/test_membership_model.py`` checks
these rules over random interleavings of both threads and the coordinator.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, order=True)
class Identity:
    """A member's place in the group: the broker accepts a commit only under its current one."""

    generation: int
    member: str


def commit_identity(held: Identity | None, live: Identity) -> Identity:
    """What a transactional commit names: the held identity (``live`` before any assignment
    was applied, when no task is held and nothing can be fenced wrongly)."""
    return live if held is None else held


def refused_before_send(held: Identity | None, live: Identity) -> bool:
    """An at-least-once commit the membership thread must not send: kafka-python always sends
    the live identity, which the broker would accept for tasks held under an older one."""
    return held is not None and held != live


def membership_ended(held: Identity | None, member: str) -> bool:
    """Whether the partitions held came under a member id that is no longer this member's:
    they were lost with it, even if kafka-python reports them kept (a member removed mid
    rebalance joins again without ``on_partitions_lost``)."""
    return held is not None and held.member != member
