"""A static leader that assigned without an input topic's partitions, then restarted, still gets the tasks.

Found in CI (tests/integration/test_engine_global_table.py): a restarted leader joined before
its metadata arrived and assigned no tasks; it was killed before kafka-python's rejoin on the
metadata change, and each restart after that was handed the stored, empty assignment by the
coordinator (a static member rejoining a stable group causes no rebalance, and kafka-python's
JoinGroup predates KIP-814, so the restarted leader is not told it leads and never watches the
metadata). Two workers sat idle for good, with every record of the input unprocessed.

Here the same state is made on purpose, on a real broker: the first member assigns while its
input topic does not exist yet and stops (a static member sends no LeaveGroup), the topic is
created, and a new member with the same ``group.instance.id`` joins. It must get every task.
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from baton.worker.assignment.membership import GroupSettings, Membership, RolesChanged
from baton.worker.assignment.model import AssignorConfig
from baton.worker.naming import TaskId

pytestmark = pytest.mark.integration


def _settings(group: str, topic: str) -> GroupSettings:
    return GroupSettings(
        group_id=group,
        process="m",
        host="m",
        instance_id="m",
        topic_to_sub={topic: 0},
        stateful_subs=frozenset(),
        state_partitions=lambda _task: [],
        assignor=AssignorConfig(),
        probing_interval_ms=600_000,
    )


@contextmanager
def _member(bootstrap: str, settings: GroupSettings) -> Iterator[Membership]:
    member = Membership(
        settings,
        {"bootstrap_servers": [bootstrap], "session_timeout_ms": 45_000, "heartbeat_interval_ms": 1000},
        offsets=dict,
        end_offsets=lambda _tps: None,
    )
    member.start()
    try:
        member.wait_started()
        yield member
    finally:
        member.stop()
        member.join(30)


def _next_roles(member: Membership, timeout: float, want: Callable[[RolesChanged], bool]) -> RolesChanged:
    """The first roles event that ``want`` accepts; other events (partitions assigned) are passed over."""
    seen: list[RolesChanged] = []
    try:
        while True:
            event = member.events.get(timeout=timeout)
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
    settings = _settings(unique_name, topic)
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
            every = frozenset(TaskId(0, p) for p in range(4))
            fixed = _next_roles(restarted, 30, lambda e: e.roles.active == every)
            assert fixed.generation > stale.generation
            assert not fixed.roles.incomplete
    finally:
        kafka_admin.delete_topics([topic])[topic].result(30)
