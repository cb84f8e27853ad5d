"""What the assignor reads and what it decides (pure values, no I/O).

Kafka Streams' HighAvailabilityTaskAssignor (KIP-441) is the model: members report how
far each task's local state is behind its changelogs, and the leader places actives,
standbys and warmups together, so that a task whose owner left goes to a member that
already holds its state.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from baton.worker.naming import TaskId

UNKNOWN_LAG = -1  # a task folder whose checkpoint could not be read: treated as no state


@dataclass(frozen=True)
class MemberReport:
    """One group member as the leader sees it (from its subscription's user data).

    ``lags`` has an entry for every task with local state on the member: the number of
    changelog records its stores are behind the changelog end (0 for a task that runs
    active here). A task absent from ``lags`` would need a full restore on this member.
    ``host`` is the pod: a task's standbys go to other hosts when there are any. ``zone`` is
    its failure domain (the node's topology.kubernetes.io/zone, Kafka Streams' rack-aware
    tags): a task's standbys go to other zones first, when there are any ("" = unknown).
    ``draining``: its Pod is about to go (a scale-in): it should own no active task.
    """

    member_id: str
    process: str  # stable identity (group.instance.id, or the process id kept in state.dir)
    host: str
    lags: Mapping[TaskId, int] = field(default_factory=dict)
    previous_active: frozenset[TaskId] = frozenset()
    previous_standby: frozenset[TaskId] = frozenset()  # standbys and warmups it hosted
    zone: str = ""
    draining: bool = False


@dataclass(frozen=True)
class AssignorConfig:
    """Kafka Streams' names: num.standby.replicas, acceptable.recovery.lag, max.warmup.replicas."""

    num_standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2


@dataclass(frozen=True)
class MemberAssignment:
    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()


@dataclass(frozen=True)
class StandbyCoverage:
    """How many stateful tasks could fail over by promotion, as the leader saw the group.

    ``caught_up`` counts the tasks with a standby on a member within acceptable.recovery.lag
    of the changelog: if the active's member dies now, the task resumes there at once. The
    operator reports it (``status.standbys``); it is as fresh as the last rebalance.
    """

    tasks: int = 0
    with_standby: int = 0
    caught_up: int = 0


@dataclass(frozen=True)
class GroupAssignment:
    """The leader's decision. ``probing`` asks for a probing rebalance: warmups are out, or a
    standby is still catching up (so that the coverage the operator shows converges)."""

    members: Mapping[str, MemberAssignment]
    probing: bool = False
    coverage: StandbyCoverage = StandbyCoverage()
