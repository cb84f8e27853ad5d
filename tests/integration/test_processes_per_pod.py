"""``baton run --processes 2`` on the real broker: two "pods" of two worker processes each.

What a pod of several processes promises: every process is a group member; a task's
standby lives on the other pod; the pod's one port serves every process's metrics and is
ready only when all are; counts are exact; and a process that dies takes its pod down
(the other pod then owns everything, with no duplicate output under exactly-once).
"""

from __future__ import annotations

import os
import random
import signal
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER
from batondev.standbys import as_list, describe, labelled_metric

from baton.testing import WorkerProcess, produce, wait_for
from tests.support.counts import assert_strictly_increasing, count_sequences

pytestmark = pytest.mark.integration


def _pod(name: str, bootstrap: str, app: str, tmp_path: Path, env: dict[str, str]) -> WorkerProcess:
    return WorkerProcess(
        CLICK_COUNTER,
        bootstrap=bootstrap,
        application_id=app,
        state_dir=tmp_path / name,
        log_path=tmp_path / f"{name}.log",
        instance_id=name,
        env=env,
        processes=2,
        extra_args=[
            "--num-standby-replicas",
            "1",
            "-X",
            "consumer.session.timeout.ms=6000",
            "-X",
            "consumer.heartbeat.interval.ms=1000",
        ],
    )


def _clicks(rng: random.Random, n: int, expected: Counter[str]) -> list[tuple[bytes, bytes]]:
    out = []
    for i in range(n):
        user = f"u{rng.randrange(300)}"
        expected[user] += 1
        out.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": i})))
    return out


def _latest_roles(pods: list[WorkerProcess]) -> dict[str, dict[str, set[str]]]:
    """Each member's (instance id's) latest roles, from its 'assignment received' log lines."""
    roles: dict[str, dict[str, set[str]]] = {}
    for pod in pods:
        for line in pod.logs():
            if line.get("msg") == "assignment received":
                member = str(line["member"])
                roles[member] = {r: {str(t) for t in _tasks(line.get(r))} for r in ("active", "standby")}
    return roles


def _tasks(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _pod_of(member: str) -> str:
    return member if member.count("-") == 1 else member.rsplit("-", 1)[0]  # pod-0-1 -> pod-0


def test_two_pods_of_two_processes(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    env = {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink}
    rng = random.Random(3)
    expected: Counter[str] = Counter()
    produce(kafka_bootstrap, source, _clicks(rng, 6000, expected))
    pods = [_pod(f"pod-{i}", kafka_bootstrap, unique_name, tmp_path, env).start() for i in range(2)]
    try:
        members = wait_for(
            "a stable group of 4 members",
            lambda: describe(kafka_bootstrap, unique_name, expect_members=4),
            120,
            every=1,
        )
        assert sorted(m.identity for m in members) == ["pod-0", "pod-0-1", "pod-1", "pod-1-1"]
        for pod in pods:
            pod.wait_ready(120)

        def placed() -> dict[str, dict[str, set[str]]] | None:
            roles = _latest_roles(pods)
            active = [t for r in roles.values() for t in r["active"]]
            standby = [t for r in roles.values() for t in r["standby"]]
            ok = len(roles) == 4 and sorted(active) == sorted(set(active)) and len(active) == 8
            return roles if ok and len(standby) == 8 else None

        roles = wait_for("8 actives and 8 standbys over 4 members", placed, 60)
        owner = {t: m for m, r in roles.items() for t in r["active"]}
        for member, r in roles.items():
            for task in r["standby"]:
                assert _pod_of(member) != _pod_of(owner[task]), (task, member, owner[task])

        def exact() -> bool:
            latest = {k: v[-1] for k, v in count_sequences(kafka_bootstrap, sink).items()}
            return latest == dict(expected)

        wait_for("exact counts from two pods of two processes", exact, 90, every=1)

        # the pod's one port: every process's series, labelled by process
        active = labelled_metric(pods[0], "baton_tasks")
        by_process = {k for k in active if 'state="active"' in k}
        assert {('process="0"' in k) for k in by_process} == {True, False}, active

        # a dying process takes its pod down (Kafka Streams' SHUTDOWN_CLIENT); the other pod takes over
        started = [line for line in pods[0].logs() if line.get("msg") == "worker process started"]
        child = {int(str(line["child"])): int(str(line["pid"])) for line in started}
        os.kill(child[1], signal.SIGKILL)
        assert pods[0].wait(60) == 128 + signal.SIGKILL  # the child's fate, as a shell reports it
        wait_for("pod-0's other process gone", lambda: not _alive(child[0]), 60)
        produce(kafka_bootstrap, source, _clicks(rng, 3000, expected))
        wait_for("exact counts after pod-0 died", exact, 120, every=1)
        assert_strictly_increasing(count_sequences(kafka_bootstrap, sink))
    finally:
        for pod in pods:
            if pod.alive:
                pod.stop()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie until its parent (the dead supervisor's reaper: init) collects it
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


def test_at_least_once_work_is_committed_when_a_joining_process_takes_half(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """The first worker owns all 8 tasks until a second joins; the revocation commits its offsets.

    Regression: under at-least-once that commit ran on kafka-python's IO thread, which the
    revocation itself was blocking: it timed out after 30 s and failed, and the new owner
    restored the flushed counts and counted the same records again (found by
    ``bench/throughput.py --processes 1,2``, where the second process joins a moment after
    the first). Two workers started one after the other make the revocation certain: a pod's
    two processes may also join in the same generation, with nothing to revoke.
    """
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    rng = random.Random(5)
    expected: Counter[str] = Counter()
    produce(kafka_bootstrap, source, _clicks(rng, 200_000, expected))
    workers = [
        WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=unique_name,
            state_dir=tmp_path / f"w{i}",
            log_path=tmp_path / f"w{i}.log",
            guarantee="at_least_once",  # the default 30 s commit interval: only the revocation commits
            env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
        )
        for i in range(2)
    ]
    first, second = workers
    try:
        first.start()
        wait_for("the first worker processing", lambda: first.metric("baton_records_consumed_total") > 0, 90)
        second.start()
        wait_for(
            "the first worker's revocation",
            lambda: any(x.get("msg") == "partitions revoked" for x in first.logs()),
            90,
        )
        wait_for(
            "exact counts",
            lambda: {k: v[-1] for k, v in count_sequences(kafka_bootstrap, sink).items()} == dict(expected),
            120,
        )
        logs = first.logs() + second.logs()
        failed = [x for x in logs if "commit" in str(x.get("msg")) and "failed" in str(x.get("msg"))]
        assert failed == []
        assert_strictly_increasing(count_sequences(kafka_bootstrap, sink))
        # The second worker was handed the first one's tasks held back, and rejoined at once for
        # them: that rejoin started the next generation. Regression: the coordinator answered it
        # with the current generation (same metadata, stable group), and the tasks came only
        # after the second worker's next heartbeat (3 s here, found by bench/throughput.py).
        steps = [
            (str(x["msg"]), int(str(x["generation"])))
            for x in second.logs()
            if x.get("msg") in ("joining the follow-up rebalance", "assignment received")
        ]
        follow_ups = [i for i, (msg, _) in enumerate(steps) if msg == "joining the follow-up rebalance"]
        assert follow_ups, steps
        for i in follow_ups:
            later = [generation for msg, generation in steps[i + 1 :] if msg == "assignment received"]
            assert later and later[0] > steps[i][1], steps
    finally:
        for w in workers:
            if w.alive:
                w.stop()


def test_a_pods_processes_wait_for_each_other_before_joining(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """The pod's processes wait for each other before their first JoinGroup (processes/join.py).

    Regression: each joined when its own start-up was done, ~0.1 s apart; the first got every
    task in a generation of its own and heard of its sibling only at its next heartbeat, then
    handed half the tasks over (bench/throughput.py --processes 2: one process did the pod's
    work for the first second).
    """
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    expected: Counter[str] = Counter()
    produce(kafka_bootstrap, source, _clicks(random.Random(7), 5000, expected))
    pod = _pod(
        "pod-0", kafka_bootstrap, unique_name, tmp_path, {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink}
    )
    pod.start()
    try:

        def exact() -> bool:
            return {k: v[-1] for k, v in count_sequences(kafka_bootstrap, sink).items()} == dict(expected)

        wait_for("exact counts from one pod of two processes", exact, 120, every=1)
        logs = pod.logs()
        joined = {str(x["member"]) for x in logs if x.get("msg") == "joining with the pod's other processes"}
        assert joined == {"pod-0", "pod-0-1"}, joined
        # Both were held until the other was ready, then joined. That they land in one rebalance
        # is then likely, not certain: the coordinator may still close the first generation with
        # one member (a fresh-clone run under the suite's load gave one process all eight tasks).
        # So the split is measured (docs/benchmarks.md, "Measured design choices": two-processes,
        # pod-leader-rejoin), and only the barrier is asserted here.
        waited = [
            int(str(x["waited_ms"])) for x in logs if x.get("msg") == "joining with the pod's other processes"
        ]
        assert len(waited) == 2 and min(waited) <= 1000, waited  # the last to arrive hardly waited
    finally:
        pod.stop()


def test_a_process_that_misses_its_pods_first_generation_does_not_wait_for_a_heartbeat(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    """Both processes pass the join barrier, but the coordinator (no initial rebalance delay
    here) may close the group's first generation on the first JoinGroup alone. The second's
    JoinGroup then starts the next rebalance, which the first would hear of only at its next
    heartbeat (10 s here; 1 s by default): meanwhile it did the pod's work and its sibling
    idled. The leader sees its pod incomplete and rejoins at once (membership.py).

    Which way the race goes is the coordinator's doing, so the pod starts three times, with
    dynamic members under at-least-once: the first generation then closed alone in 4 of 12
    starts (under exactly-once in none of 16, with static members in none of 6). Whichever way, no
    process may wait for a heartbeat to get its first tasks. Without the rejoin, 2 of 3
    runs of this test failed.
    """
    source = new_topic(8, name=f"{unique_name}-clicks")
    produce(kafka_bootstrap, source, _clicks(random.Random(3), 2000, Counter()))
    for attempt in range(3):
        app = f"{unique_name}-{attempt}"
        sink = new_topic(8, name=f"{app}-counts")
        pod = WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=app,
            state_dir=tmp_path / app,
            log_path=tmp_path / f"{app}.log",
            env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
            processes=2,
            guarantee="at_least_once",
            extra_args=[
                "-X",
                "consumer.session.timeout.ms=30000",
                "-X",
                "consumer.heartbeat.interval.ms=10000",
            ],
        )
        pod.start()
        try:
            both = wait_for("both processes of the pod got tasks", partial(_first_tasks, pod), 60)
            logs = sorted(pod.logs(), key=lambda x: str(x.get("ts")))
            before = [x for x in logs if str(x.get("ts")) < max(both.values())]
            heard = [x for x in before if "is rebalancing" in str(x.get("msg"))]
            assert not heard, f"a process waited for a heartbeat to hear of its sibling: {heard}"
            alone = {
                str(x["member"])
                for x in before
                if x.get("msg") == "assignment received" and len(as_list(x.get("active"))) == 8
            }
            rejoined = {
                str(x["member"])
                for x in before
                if x.get("msg") == "rejoining at once: the pod's other processes are joining"
            }
            assert rejoined == alone, (alone, rejoined)
        finally:
            pod.stop()


def _first_tasks(pod: WorkerProcess) -> dict[str, str] | None:
    """When each process of the pod got its first partitions, once both have."""
    firsts: dict[str, str] = {}
    for x in pod.logs():
        if x.get("msg") == "partitions assigned" and x.get("partitions"):
            firsts.setdefault(str(x["member"]), str(x["ts"]))
    return firsts if len(firsts) == 2 else None
