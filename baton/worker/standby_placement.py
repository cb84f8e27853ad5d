"""Where standby tasks go: a pure, deterministic rule every member computes for itself.

confluent-kafka has no custom assignors, so standbys cannot be handed out by the group
leader as Kafka Streams does. Instead every member describes the group (members and
their assignments), and applies the same rule to the same facts:

* the members form a ring, ordered by a stable identity (``group.instance.id`` when set,
  else ``client.id``, which carries the process id kept in ``state.dir``; the
  broker-given member id breaks ties). The order in which the broker lists members
  does not matter;
* task ``t`` owned by the member at ring position ``i`` gets its standbys on the members
  at positions ``i+1 .. i+k`` (``k = num.standby.replicas``, capped at ``members - 1``),
  so a standby is never on the task's owner and never twice on one member;
* with a balanced active assignment (what cooperative-sticky produces), every member
  hosts as many standbys as its ``k`` predecessors own tasks: spread evenly.

Putting all standbys of one owner on its ring successor has a useful consequence: when
that owner dies, the group (not us) hands its orphaned tasks to the survivors, and a
balancing assignor rarely leaves the successor out (with three members it never does),
so some tasks are promoted from a warm standby instead of a full restore. Which member
receives which orphan stays the assignor's choice; a task that lands elsewhere restores
in full.

Nothing here does I/O; ``group_view.py`` turns a group description into ``Member`` values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from baton.worker.naming import TaskId, tasks_for


@dataclass(frozen=True)
class Member:
    """One consumer of the group as the broker describes it."""

    member_id: str
    identity: str  # group.instance.id, or client.id for dynamic members
    partitions: tuple[tuple[str, int], ...]

    @property
    def ring_key(self) -> tuple[str, str]:
        return (self.identity, self.member_id)


def ring(members: Iterable[Member]) -> list[Member]:
    """Members in ring order: independent of the order they were listed in."""
    return sorted(members, key=lambda m: m.ring_key)


def task_owners(members: Iterable[Member], topic_to_sub: Mapping[str, int]) -> dict[TaskId, str]:
    """Task -> member id of its owner. Topics outside the topology are ignored.

    A task with co-partitioned inputs is owned by whoever holds its first input partition
    (mid-rebalance the inputs of one task can briefly sit with different members).
    """
    owners: dict[TaskId, str] = {}
    for member in ring(members):
        known = [tp for tp in member.partitions if tp[0] in topic_to_sub]
        for task in tasks_for(known, dict(topic_to_sub)):
            owners.setdefault(task, member.member_id)
    return owners


def place(members: Iterable[Member], owners: Mapping[TaskId, str], replicas: int) -> dict[TaskId, list[str]]:
    """Task -> member ids hosting its standbys (in ring order after the owner)."""
    ordered = [m.member_id for m in ring(members)]
    position = {member_id: i for i, member_id in enumerate(ordered)}
    count = min(replicas, len(ordered) - 1)
    out: dict[TaskId, list[str]] = {}
    for task, owner in sorted(owners.items()):
        if owner not in position or count <= 0:
            continue
        start = position[owner]
        out[task] = [ordered[(start + step) % len(ordered)] for step in range(1, count + 1)]
    return out


def standbys_of(member_id: str, members: Iterable[Member], topic_to_sub: Mapping[str, int],
                replicas: int) -> set[TaskId]:
    """The standby tasks ``member_id`` must host: the whole rule, for one member."""
    members = list(members)
    placed = place(members, task_owners(members, topic_to_sub), replicas)
    return {task for task, hosts in placed.items() if member_id in hosts}
