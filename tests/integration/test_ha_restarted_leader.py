"""A static leader restarted within its session is handed its stored assignment, and is not told it leads.

kafka-python's JoinGroup predates KIP-814, so the coordinator answers a restarted static
leader of a stable group with the old leader's id: the new process never runs the
assignor, never watches the topics' metadata, and never schedules what the old one would
have (the probing rebalance). Whatever the stored assignment lacks, the group keeps.

Found in CI (tests/integration/test_engine_global_table.py): a restarted leader joined before
its metadata had arrived and assigned no tasks; it was killed before kafka-python's rejoin on
the metadata change, and each restart after that was handed the stored, empty assignment.
Two workers sat idle for good, with every record of the input unprocessed.

Both states are made here on purpose, on a real broker, with the membership alone (no worker):
the leader stops (a static member sends no LeaveGroup) and a new member with the same
``group.instance.id`` joins at once.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from baton.worker.assignment.membership import TP, GroupSettings, Membership, Revoked, RolesChanged
from baton.worker.assignment.model import AssignorConfig
from baton.worker.naming import TaskId

pytestmark = pytest.mark.integration

EVERY = frozenset(TaskId(0, p) for p in range(4))


def _settings(group: str, topic: str, member: str, *, stateful: bool = False) -> GroupSettings:
    return GroupSettings(
        group_id=group,
        process=member,
        host=member,
        instance_id=member,
        topic_to_sub={topic: 0},
        stateful_subs=frozenset({0}) if stateful else frozenset(),
        state_partitions=lambda task: [(f"{group}-changelog", task.partition)],
        assignor=AssignorConfig(),
        probing_interval_ms=4000,
    )


def _far_ends(tps: list[TP]) -> dict[TP, int]:
    """Changelog ends far beyond acceptable.recovery.lag: a member without state is no owner yet."""
    return dict.fromkeys(tps, 1_000_000)


@contextmanager
def _member(bootstrap: str, settings: GroupSettings) -> Iterator[Membership]:
    member = Membership(
        settings,
        {"bootstrap_servers": [bootstrap], "session_timeout_ms": 45_000, "heartbeat_interval_ms": 1000},
        offsets=dict,
        end_offsets=_far_ends,
    )
    member.start()
    try:
        member.wait_started()
        yield member
    finally:
        member.stop()
        member.join(30)


def _next_roles(member: Membership, timeout: float, want: Callable[[RolesChanged], bool]) -> RolesChanged:
    """The first roles event that ``want`` accepts; revocations are released at once, as the
    processing thread would after its commit."""
    seen: list[RolesChanged] = []
    try:
        while True:
            event = member.events.get(timeout=timeout)
            if isinstance(event, Revoked):
                event.done.set()
            if isinstance(event, RolesChanged):
                seen.append(event)
                if want(event):
                    return event
    except queue.Empty:
        raise AssertionError(f"no such roles within {timeout:g} s; saw {seen}") from None


def test_a_restarted_static_leader_reassigns_when_its_stored_assignment_missed_a_topic(
    kafka_bootstrap: str, kafka_admin: AdminClient, unique_name: str
) -> None:
    topic = f"{unique_name}-late"
    settings = _settings(unique_name, topic, "m")
    with _member(kafka_bootstrap, settings) as first:
        stale = _next_roles(first, 30, lambda _e: True)
        assert not stale.roles.active
        assert stale.roles.incomplete, "the leader did not say its assignment missed a topic"

    kafka_admin.create_topics([NewTopic(topic, num_partitions=4, replication_factor=1)])[topic].result(30)
    try:
        with _member(kafka_bootstrap, settings) as restarted:
            handed = _next_roles(restarted, 30, lambda _e: True)
            # the coordinator hands the restarted member its stored assignment: the stale one
            assert handed.generation == stale.generation
            assert not handed.roles.active
            fixed = _next_roles(restarted, 30, lambda e: e.roles.active == EVERY)
            assert fixed.generation > stale.generation
            assert not fixed.roles.incomplete
    finally:
        kafka_admin.delete_topics([topic])[topic].result(30)


def test_warmups_are_still_probed_after_the_leader_restarts(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str
) -> None:
    """The leader keeps every task (the newcomer has no state) and gives the newcomer warmups,
    with a probing rebalance due in 4 s; it restarts at once. The probe must still come."""
    topic = new_topic(4)
    leader_settings = _settings(unique_name, topic, "a", stateful=True)
    with _member(kafka_bootstrap, leader_settings) as leader:
        _next_roles(leader, 30, lambda e: e.roles.active == EVERY)
        with _member(kafka_bootstrap, _settings(unique_name, topic, "b", stateful=True)) as newcomer:
            warming = _next_roles(newcomer, 30, lambda e: bool(e.roles.warmup))
            assert not warming.roles.active and warming.roles.probe_after_ms == 4000
            leader.stop()
            leader.join(30)
            with _member(kafka_bootstrap, leader_settings) as restarted:
                handed = _next_roles(restarted, 30, lambda _e: True)
                # the premise: the restart was handed the stored assignment, not a new one
                assert handed.generation == warming.generation
                assert handed.roles.active == EVERY
                probed = _next_roles(restarted, 30, lambda e: e.generation > warming.generation)
                assert probed.roles.active == EVERY  # the newcomer is still not caught up
