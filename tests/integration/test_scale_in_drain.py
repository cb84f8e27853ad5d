"""A scale-in's drain on the real broker (issue 49): a Pod the operator marks to go hands its
active tasks to the members holding their standbys while it keeps running, and takes its share
back when the mark is withdrawn, with the output exact throughout.

The marks travel as the operator writes them (``baton.operator.flips.write_draining``) and are
read back as the operator reads them (``baton.operator.coverage``: DescribeGroups and the
leader's assignment user data), so both ends of the autoscaler's drain step run here.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.control.channel import control_topic
from baton.operator.coverage import GroupRoles, describe, roles_from
from baton.operator.flips import write_draining
from baton.testing import SteadyInput, WorkerProcess, wait_for
from tests.support.click_counters import wait_for_changelog_past
from tests.support.flips import TOPOLOGY, assert_exact, latest_counts
from tests.support.secured import listener, properties_file

pytestmark = pytest.mark.integration

PODS = ("pod-0", "pod-1", "pod-2")


def _pod(
    bootstrap: str, base: str, topics: tuple[str, str], tmp: Path, i: int, *, args: list[str]
) -> WorkerProcess:
    """The i-th Pod of the blue color: its worker follows the control topic under its Pod's name."""
    pod, group = PODS[i], f"{base}-blue"
    env = {"CLICKS_TOPIC": topics[0], "COUNTS_TOPIC": topics[1], "BATON_COLOR": "blue", "BATON_HOST": pod}
    return WorkerProcess(
        TOPOLOGY,
        bootstrap=bootstrap,
        application_id=group,
        state_dir=tmp / pod,
        log_path=tmp / f"{pod}.log",
        instance_id=f"{group}-{i}",
        env={**env, "BATON_CONTROL_TOPIC": control_topic(base)},
        extra_args=args,
    )


def _roles(bootstrap: str, group: str) -> GroupRoles | None:
    return roles_from(describe({"bootstrap.servers": bootstrap}, [group])[group])


def _starts_since(worker: WorkerProcess, since: float) -> list[str]:
    """Kinds of the active tasks the worker started after ``since`` (wall time)."""
    out = []
    for line in worker.logs():
        if line.get("msg") == "active task started":
            ts = calendar.timegm(time.strptime(str(line["ts"])[:19], "%Y-%m-%dT%H:%M:%S"))
            if ts >= since:
                out.append(str(line["kind"]))
    return out


def test_a_pod_marked_to_drain_hands_its_tasks_to_their_standbys_and_takes_them_back(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    base, clicks, counts = unique_name, new_topic(partitions=6), new_topic(partitions=6)
    group = f"{base}-blue"
    # A changelog shorter than acceptable.recovery.lag makes every member caught up, state or
    # not (Kafka Streams' rule): the drained Pod's second task then goes wherever balance
    # wants it when both its standbys sit on one member, and restores there from scratch (a
    # CI run did). With a low bound, only a copy within 20 records counts as state; a task
    # that fits nowhere caught up stays on the draining Pod until a warmup holds it. The drain
    # waits until every changelog partition is past the bound.
    args = [
        "--no-write-cache",
        "--num-standby-replicas",
        "1",
        "--probing-rebalance-interval-ms",
        "2000",
        "--acceptable-recovery-lag",
        "20",
    ]
    workers = [
        _pod(kafka_bootstrap, base, (clicks, counts), tmp_path, i, args=args) for i in range(len(PODS))
    ]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.wait_ready(120)
        with SteadyInput(kafka_bootstrap, clicks, rate=200) as steady:

            def spread() -> bool:
                roles = _roles(kafka_bootstrap, group)
                return roles is not None and roles.members == 3 and all(roles.actives_on({p}) for p in PODS)

            wait_for("three members, each running tasks", spread, 120, every=1)
            # past the bound on every partition (a slow machine may take a while): only then is
            # a member with no copy of a task not caught up
            wait_for_changelog_past(kafka_bootstrap, group, 6, 60)
            time.sleep(3)  # the standbys catch up (probing rebalances every 2 s)
            marked_at = time.time()
            write_draining(kafka_bootstrap, control_topic(base), {}, "blue", frozenset({"pod-2"}))

            def drained() -> bool:
                roles = _roles(kafka_bootstrap, group)
                return roles is not None and roles.members == 3 and roles.actives_on({"pod-2"}) == 0

            wait_for("pod-2 never released its tasks", drained, 90, every=0.5)
            assert any(str(line.get("msg", "")).startswith("marked to drain") for line in workers[2].logs())

            # its tasks went where their state was: promoted standbys, nothing restored
            def moved() -> list[str]:
                return _starts_since(workers[0], marked_at - 1) + _starts_since(workers[1], marked_at - 1)

            wait_for("its two tasks never started elsewhere", lambda: len(moved()) >= 2, 30, every=0.5)
            assert set(moved()) == {"promoted"}, moved()
            time.sleep(2)
            roles = _roles(kafka_bootstrap, group)
            assert roles is not None and roles.actives_on({"pod-2"}) == 0, roles  # it stays drained

            write_draining(kafka_bootstrap, control_topic(base), {}, "blue", frozenset())

            def back() -> bool:
                roles = _roles(kafka_bootstrap, group)
                return roles is not None and roles.actives_on({"pod-2"}) == 2

            wait_for("pod-2 never took its share back", back, 90, every=0.5)
            time.sleep(1)
        sent = steady.sent
        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 120)
        assert_exact(kafka_bootstrap, counts, sent)
    finally:
        for w in workers:
            w.stop()


@pytest.mark.parametrize("name", ["mtls", "sasl-ssl-scram-sha-512"])
def test_the_drain_mark_and_the_group_read_work_over_a_secured_listener(
    name: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """The operator's two reads and writes of a drain, with the client settings of a secured
    listener: the mark reaches the worker (it says so), and DescribeGroups gives its Pod's tasks."""
    bootstrap, settings = listener(name)
    base, clicks, counts = unique_name, new_topic(partitions=2), new_topic(partitions=2)
    group = f"{base}-blue"
    config = properties_file(settings, tmp_path / "client.properties")
    worker = _pod(bootstrap, base, (clicks, counts), tmp_path, 0, args=["--kafka-config-file", str(config)])
    client = {"bootstrap.servers": bootstrap, **settings}
    try:
        worker.start().wait_ready(120)

        def runs() -> GroupRoles | None:
            roles = roles_from(describe(client, [group])[group])
            return roles if roles is not None and roles.actives_on({"pod-0"}) == 2 else None

        wait_for(f"the group read over {name}", runs, 60, every=1)
        write_draining(bootstrap, control_topic(base), settings, "blue", frozenset({"pod-0"}))
        wait_for(
            "the worker never heard of its drain mark",
            lambda: any(str(x.get("msg", "")).startswith("marked to drain") for x in worker.logs()),
            30,
            every=0.5,
        )
        # the only member drains nowhere: it keeps its tasks
        roles = runs()
        assert roles is not None and roles.members == 1, roles
    finally:
        worker.stop()


def test_a_pod_marked_to_drain_leaves_the_group_when_it_stops(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """The Pod a scale-in removes is a static member, which sends no LeaveGroup when it closes:
    without more, the group kept it for its whole session timeout (45 s), and every rebalance
    meanwhile waited for it. Marked to drain, it leaves as it stops; an unmarked static member
    that stops stays in the group (a restarted Pod takes its place without a rebalance)."""
    base, clicks, counts = unique_name, new_topic(partitions=4), new_topic(partitions=4)
    group = f"{base}-blue"
    args = ["--no-write-cache", "--num-standby-replicas", "1", "--probing-rebalance-interval-ms", "2000"]
    workers = [_pod(kafka_bootstrap, base, (clicks, counts), tmp_path, i, args=args) for i in range(3)]
    try:
        for w in workers:
            w.start()
        for w in workers:
            w.wait_ready(120)
        with SteadyInput(kafka_bootstrap, clicks, rate=200) as steady:

            def members(n: int) -> Callable[[], bool]:
                def check() -> bool:
                    roles = _roles(kafka_bootstrap, group)
                    return roles is not None and roles.members == n

                return check

            wait_for("three members", members(3), 120, every=1)
            time.sleep(3)  # the standbys catch up
            write_draining(kafka_bootstrap, control_topic(base), {}, "blue", frozenset({"pod-2"}))

            def drained() -> bool:
                roles = _roles(kafka_bootstrap, group)
                return roles is not None and roles.members == 3 and roles.actives_on({"pod-2"}) == 0

            wait_for("pod-2 never released its tasks", drained, 90, every=0.5)
            workers[2].stop()
            # inside the 45 s session timeout, which alone removed it before: the broker drops
            # a member that leaves at once, before the rebalance after it completes (which
            # took over 30 s in a loaded fresh-clone run), so the members are counted as listed
            wait_for(
                "pod-2, stopped while marked to drain, still a member",
                lambda: (
                    len(describe({"bootstrap.servers": kafka_bootstrap}, [group])[group].get("members") or [])
                    == 2
                ),
                30,
                every=0.5,
            )
            assert any(str(x.get("msg", "")).startswith("left the group for good") for x in workers[2].logs())

            workers[1].stop()  # not marked: a static member that stops keeps its place for its session
            time.sleep(8)
            assert members(2)(), "an unmarked static member left the group when it stopped"
            assert not any(str(x.get("msg", "")).startswith("left the group") for x in workers[1].logs())
            workers[1].start().wait_ready(120)  # and its restart takes that place back
            time.sleep(2)
        sent = steady.sent
        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 120)
        assert_exact(kafka_bootstrap, counts, sent)
    finally:
        for w in workers:
            w.stop()
