"""Standby placement (pure rule), group descriptions to members, and the cleanup delay."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import ConsumerGroupState, TopicPartition
from confluent_kafka.admin._group import ConsumerGroupDescription, MemberAssignment, MemberDescription

from baton.worker import statedir
from baton.worker.group_view import members_from
from baton.worker.naming import TaskId
from baton.worker.standby import due_for_cleanup
from baton.worker.standby_placement import Member, place, standbys_of, task_owners

pytestmark = pytest.mark.unit

TOPICS = {"clicks": 0}


def _members(assignment: dict[str, list[int]]) -> list[Member]:
    return [Member(member_id=f"mid-{name}", identity=name, partitions=tuple(("clicks", p) for p in parts))
            for name, parts in assignment.items()]


THREE = {"w0": [0, 1, 2], "w1": [3, 4, 5], "w2": [6, 7]}


def test_never_on_the_owner_and_exactly_k_copies() -> None:
    members = _members(THREE)
    owners = task_owners(members, TOPICS)
    for replicas in (1, 2):
        placed = place(members, owners, replicas)
        assert set(placed) == {TaskId(0, p) for p in range(8)}
        for task, hosts in placed.items():
            assert owners[task] not in hosts
            assert len(hosts) == len(set(hosts)) == replicas


def test_replicas_are_capped_at_the_other_members() -> None:
    members = _members({"w0": [0, 1], "w1": [2, 3]})
    placed = place(members, task_owners(members, TOPICS), 5)
    assert all(len(hosts) == 1 for hosts in placed.values())
    alone = _members({"w0": [0, 1, 2]})
    assert place(alone, task_owners(alone, TOPICS), 1) == {}


def test_ring_successor_hosts_the_owners_standbys() -> None:
    members = _members(THREE)
    assert standbys_of("mid-w1", members, TOPICS, 1) == {TaskId(0, p) for p in (0, 1, 2)}
    assert standbys_of("mid-w2", members, TOPICS, 1) == {TaskId(0, p) for p in (3, 4, 5)}
    assert standbys_of("mid-w0", members, TOPICS, 1) == {TaskId(0, p) for p in (6, 7)}
    # two replicas: everybody hosts every task it does not own
    assert standbys_of("mid-w0", members, TOPICS, 2) == {TaskId(0, p) for p in range(3, 8)}


def test_stable_under_member_order() -> None:
    members = _members(THREE)
    expected = {m.member_id: standbys_of(m.member_id, members, TOPICS, 1) for m in members}
    for order in itertools.permutations(members):
        assert {m.member_id: standbys_of(m.member_id, order, TOPICS, 1) for m in members} == expected


def test_spread_evenly_with_a_balanced_assignment() -> None:
    rng = random.Random(5)
    for n in (2, 3, 4, 6):
        partitions = list(range(24))
        rng.shuffle(partitions)
        members = _members({f"w{i}": partitions[i::n] for i in range(n)})
        load = Counter(h for hosts in place(members, task_owners(members, TOPICS), 1).values() for h in hosts)
        assert max(load.values()) - min(load.values()) <= 1, load
        assert sum(load.values()) == 24


def test_only_topology_topics_and_co_partitioned_inputs_make_one_task() -> None:
    topics = {"clicks": 0, "views": 0, "orders": 1}
    members = [Member("m1", "a", (("clicks", 0), ("views", 0), ("other", 0))),
               Member("m2", "b", (("orders", 0), ("clicks", 1), ("views", 1)))]
    owners = task_owners(members, topics)
    assert owners == {TaskId(0, 0): "m1", TaskId(0, 1): "m2", TaskId(1, 0): "m2"}
    assert standbys_of("m1", members, topics, 1) == {TaskId(0, 1), TaskId(1, 0)}


def test_members_from_a_group_description() -> None:
    def member(mid: str, client: str, instance: str | None, parts: list[int]) -> MemberDescription:
        return MemberDescription(mid, client, "/127.0.0.1", MemberAssignment(
            [TopicPartition("clicks", p) for p in parts]), group_instance_id=instance)

    def description(state: ConsumerGroupState) -> ConsumerGroupDescription:
        return ConsumerGroupDescription("app", False, [member("m-2", "app-x", "pod-1", [3, 1]),
                                                       member("m-1", "app-y", None, [0])],
                                        "cooperative-sticky", state, None)  # type: ignore[arg-type]

    assert members_from(description(ConsumerGroupState.COMPLETING_REBALANCING)) is None
    members = members_from(description(ConsumerGroupState.STABLE))
    assert members == [Member("m-2", "pod-1", (("clicks", 1), ("clicks", 3))), Member("m-1", "app-y", (("clicks", 0),))]


def test_cleanup_waits_for_the_delay_and_spares_tasks_in_use() -> None:
    unused = {TaskId(0, 1): 100.0, TaskId(0, 2): 150.0, TaskId(0, 3): 50.0}
    assert due_for_cleanup(unused, [TaskId(0, 3)], now=200.0, delay=60.0) == [TaskId(0, 1)]
    assert due_for_cleanup(unused, [], now=200.0, delay=0.0) == sorted(unused)
    assert due_for_cleanup(unused, [], now=120.0, delay=600.0) == []


def test_state_dir_identity_and_lock(tmp_path: Path) -> None:
    app_dir = tmp_path / "app"
    first = statedir.process_id(app_dir)
    assert statedir.process_id(app_dir) == first  # stable across restarts
    fd = statedir.lock(app_dir)
    try:
        import subprocess
        import sys
        code = ("import sys; from pathlib import Path; from baton.worker import statedir\n"
                "try:\n statedir.lock(Path(sys.argv[1]))\nexcept statedir.StateDirLocked:\n sys.exit(3)\n")
        assert subprocess.run([sys.executable, "-c", code, str(app_dir)]).returncode == 3
    finally:
        import os
        os.close(fd)
    (app_dir / "0_1" / "store").mkdir(parents=True)
    (app_dir / "1_7").mkdir()
    (app_dir / "not-a-task").mkdir()
    assert statedir.task_dirs(app_dir) == {TaskId(0, 1), TaskId(1, 7)}
    statedir.remove_task(app_dir, TaskId(0, 1))
    assert statedir.task_dirs(app_dir) == {TaskId(1, 7)}
