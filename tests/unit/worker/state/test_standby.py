"""Group descriptions to members, the cleanup delay of unused task folders, the state dir lock."""

from __future__ import annotations

from pathlib import Path

import pytest
from batondev.standbys import Member, members_from
from confluent_kafka import ConsumerGroupState, TopicPartition
from confluent_kafka.admin._group import ConsumerGroupDescription, MemberAssignment, MemberDescription

from baton.worker.naming import TaskId
from baton.worker.state import statedir
from baton.worker.state.standby import due_for_cleanup

pytestmark = pytest.mark.unit


def test_members_from_a_group_description() -> None:
    def member(mid: str, client: str, instance: str | None, parts: list[int]) -> MemberDescription:
        return MemberDescription(
            mid,
            client,
            "/127.0.0.1",
            MemberAssignment([TopicPartition("clicks", p) for p in parts]),
            group_instance_id=instance,
        )

    def description(state: ConsumerGroupState) -> ConsumerGroupDescription:
        return ConsumerGroupDescription(
            "app",
            False,
            [member("m-2", "app-x", "pod-1", [3, 1]), member("m-1", "app-y", None, [0])],
            "cooperative-sticky",
            state,
            None,  # type: ignore[arg-type]
        )

    assert members_from(description(ConsumerGroupState.COMPLETING_REBALANCING)) is None
    members = members_from(description(ConsumerGroupState.STABLE))
    assert members == [
        Member("m-2", "pod-1", (("clicks", 1), ("clicks", 3))),
        Member("m-1", "app-y", (("clicks", 0),)),
    ]


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

        code = (
            "import sys; from pathlib import Path; from baton.worker.state import statedir\n"
            "try:\n statedir.lock(Path(sys.argv[1]))\nexcept statedir.StateDirLocked:\n sys.exit(3)\n"
        )
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
