"""Static membership: a worker restarted with the same --instance-id inside session.timeout.ms
gets its partitions back, and the other members see no rebalance at all.

Every rebalance hands every member its roles from the leader's assignor (logged as
"assignment received"), even with nothing new to assign, so "no rebalance" is asserted
from the other members' rebalance counters (assign, revoke, lost) and their rebalance
and assignment log lines, which must not move. Both restart kinds are covered: SIGKILL (a crash) and SIGTERM (a rolling restart).
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from batondev.paths import CLICK_COUNTER
from batondev.standbys import clicks, describe, hosted_standbys, owned_tasks, settled

from baton.testing import WorkerProcess, latest_by_key, produce, read_all, wait_for

pytestmark = pytest.mark.integration


def _rebalance_lines(w: WorkerProcess) -> int:
    return sum(
        1
        for x in w.logs()
        if str(x.get("msg", "")).startswith("rebalance:")
        or x.get("msg") in ("partitions lost", "assignment received")
    )


def _assignment_story(workers: dict[str, WorkerProcess]) -> str:
    """Every member's group events, all runs, for a failure message (a race is rarely rerun)."""
    kept = (
        "assignment received",
        "partitions assigned",
        "assignment computed",
        "rebalance:",
        "joining",
        "(Re-)joining",
        "Successfully joined",
    )
    lines = []
    for name, w in workers.items():
        for x in w.logs(current_run_only=False):
            msg = str(x.get("msg", ""))
            if msg.startswith(kept) or "follow-up" in msg or "probing" in msg:
                rest = {
                    k: v for k, v in x.items() if k not in ("ts", "level", "logger", "app", "member", "msg")
                }
                lines.append(f"{x.get('ts')} {name} {msg[:80]} {rest}")
    return "\n".join(sorted(lines))


def _assigned(w: WorkerProcess) -> list[int]:
    """Partitions of the last 'partitions assigned' line of the current run."""
    lines = [x for x in w.logs() if x.get("msg") == "partitions assigned"]
    parts = lines[-1]["partitions"] if lines else []
    assert isinstance(parts, list)
    return sorted(p for _t, p in parts)


def test_restart_within_the_session_timeout_moves_nothing(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    env = {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink}
    workers = {
        f"w{i}": WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=unique_name,
            state_dir=tmp_path / f"s{i}",
            log_path=tmp_path / f"w{i}.log",
            instance_id=f"w{i}",
            env=env,
            extra_args=[
                "--num-standby-replicas",
                "1",
                "-X",
                "consumer.session.timeout.ms=30000",
                "-X",
                "consumer.heartbeat.interval.ms=1000",
            ],
        ).start()
        for i in range(3)
    }
    expected: Counter[str] = Counter()

    def feed(start: int, n: int) -> None:
        batch = clicks(start, n, prefix="u")
        batch = [(f"u{i % 500}".encode(), v) for i, (_k, v) in enumerate(batch)]
        expected.update(k.decode() for k, _v in batch)
        produce(kafka_bootstrap, source, batch)

    def counts_match() -> bool:
        got = {
            k.decode(): int(v) for k, v in latest_by_key(read_all(kafka_bootstrap, sink)).items() if k and v
        }
        return got == dict(expected)

    try:
        for w in workers.values():
            w.wait_ready(60)
        # settled, not merely stable: a restart must move nothing from where the group came to rest
        owned = wait_for("group never settled", lambda: settled(kafka_bootstrap, unique_name, workers), 60)
        wait_for(
            "standbys not placed", lambda: sum(len(hosted_standbys(w)) for w in workers.values()) == 8, 60
        )
        feed(0, 3000)
        wait_for("counts never matched", counts_match, 60, every=1)

        for name, sig in (("w1", signal.SIGKILL), ("w2", signal.SIGTERM)):
            others = {n: w for n, w in workers.items() if n != name}
            before = {n: (w.metric("baton_rebalances_total"), _rebalance_lines(w)) for n, w in others.items()}
            assert all(count > 0 for count, _lines in before.values())
            victim = workers[name]
            victim.kill(sig)
            assert victim.wait(30) == (-signal.SIGKILL if sig == signal.SIGKILL else 0)
            victim.start()
            victim.wait_ready(60)
            assert _assigned(victim) == owned[name], _assignment_story(workers)  # its own, no rebalance
            assert victim.restored() == 0  # its stores are intact in its state dir: nothing to replay
            feed(3000 if name == "w1" else 6000, 3000)  # work flows through every member again
            wait_for("counts never matched after the restart", counts_match, 60, every=1)
            time.sleep(2)  # a rebalance, had one started, would have reached the callbacks by now
            after = {n: (w.metric("baton_rebalances_total"), _rebalance_lines(w)) for n, w in others.items()}
            assert after == before, f"{name} restart caused a rebalance on others: {before} -> {after}"
            assert describe(kafka_bootstrap, unique_name, expect_members=3) is not None
            assert owned_tasks(describe(kafka_bootstrap, unique_name) or []) == owned
    finally:
        for w in workers.values():
            if w.alive:
                w.stop(30)
