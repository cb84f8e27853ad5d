"""The commit barrier at rejoin (``Membership._commit_barrier``): when a member asks its
processing thread to commit before its JoinGroup, when it only asks it to pause, and that
it never waits past its bound. The broker's side (no transaction aborted across a join and a
leave, the output exact) is ``tests/integration/test_eos_rebalance_commits.py``.

The kafka-python consumer is replaced by its one call the barrier makes, ``group_metadata()``.
"""

from __future__ import annotations

import queue
import threading
from types import SimpleNamespace

import pytest
from kafka.structs import MemberState
from kafka.structs import TopicPartition as KTopicPartition

from baton.worker.assignment.membership import (
    GroupSettings,
    Membership,
    Rejoining,
    RolesChanged,
)
from baton.worker.assignment.model import AssignorConfig
from baton.worker.assignment.wire import Roles

pytestmark = pytest.mark.unit

MEMBER = "m-1"


class _Consumer:
    """The live identity kafka-python reports (``KafkaConsumer.group_metadata``)."""

    def __init__(self, generation: int, member: str = MEMBER) -> None:
        self.generation, self.member = generation, member

    def group_metadata(self) -> SimpleNamespace:
        return SimpleNamespace(
            generation_id=self.generation,
            member_id=self.member,
            state=MemberState.REBALANCING,
            group_instance_id=None,
        )


def _member(*, enabled: bool = True, session_ms: int = 45_000) -> Membership:
    """A member at generation 3 holding t-0, its processing thread caught up with that assignment."""
    settings = GroupSettings(
        group_id="g",
        process="p",
        host="h",
        instance_id=None,
        topic_to_sub={"t": 0},
        stateful_subs=frozenset(),
        state_partitions=lambda task: [],
        assignor=AssignorConfig(),
        probing_interval_ms=600_000,
    )
    m = Membership(
        settings,
        {"session_timeout_ms": session_ms},
        offsets=dict,
        end_offsets=lambda tps: None,
        commit_before_rejoin=enabled,
    )
    m._consumer = _Consumer(3)
    m._assigned_generation = 3
    m.partitions_assigned([KTopicPartition("t", 0)])
    m.applied(RolesChanged(3, Roles(), frozenset({("t", 0)}), MEMBER))
    m.events.get_nowait()  # the Assigned above
    return m


def _answer(m: Membership, seen: list[Rejoining]) -> threading.Thread:
    """The processing thread: takes the next event and, being a Rejoining, ends its commit."""

    def run() -> None:
        event = m.events.get(timeout=30)
        assert isinstance(event, Rejoining)
        seen.append(event)
        event.done.set()

    thread = threading.Thread(target=run)
    thread.start()
    return thread


def test_a_member_holding_tasks_waits_for_the_commit_before_it_joins() -> None:
    m, seen = _member(), list[Rejoining]()
    thread = _answer(m, seen)
    m._commit_barrier()  # returns only once the processing thread ended its commit
    assert len(seen) == 1 and seen[0].commit and seen[0].done.is_set()
    assert not seen[0].abandoned.is_set()
    thread.join()


def test_the_wait_is_bounded_and_a_late_commit_is_called_off() -> None:
    m = _member(session_ms=300)  # the bound: a third of the session
    m._commit_barrier()  # nobody answers: the member joins anyway
    event = m.events.get_nowait()
    assert isinstance(event, Rejoining) and event.commit
    assert event.abandoned.is_set()  # the processing thread, when it comes, does not commit


def test_a_generation_already_past_the_held_one_asks_only_for_the_pause() -> None:
    m = _member()
    m._consumer = _Consumer(4)  # joined, then the SyncGroup failed
    m._commit_barrier()  # no wait: no processing thread answers here
    event = m.events.get_nowait()
    assert isinstance(event, Rejoining) and not event.commit


@pytest.mark.parametrize("case", ["no tasks", "membership ended", "at-least-once", "stopping"])
def test_no_barrier_where_there_is_nothing_to_commit_under_this_membership(case: str) -> None:
    m = _member(enabled=case != "at-least-once")
    if case == "no tasks":
        m.partitions_lost([KTopicPartition("t", 0)])
        m.events.get_nowait()  # the Lost
    elif case == "membership ended":  # removed and joined again: its tasks are lost, not committed
        m._consumer = _Consumer(3, member="m-2")
    elif case == "stopping":
        m.stop()
    m._commit_barrier()
    with pytest.raises(queue.Empty):
        m.events.get_nowait()
