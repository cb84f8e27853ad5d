"""The demo behind ``make demo``: the whole product on the local stack, checked end to end.

It prints what it does step by step and exits 0 only if the final counts in the
``read_committed`` output equal what the produced clicks imply, user by user.
"""

from __future__ import annotations

import collections
import contextlib
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path

import click
import orjson
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from baton.worker.testing import WorkerProcess, latest_by_key, produce, read_all, wait_for

from . import kafka, stack

REPO = Path(__file__).resolve().parents[2]
USERS = ["alice", "bob", "carol", "dave", "erin", "frank", "grace", "heidi"]


def say(step: str) -> None:
    click.secho(f"\n==> {step}", bold=True)


def clicks(n: int, seed: int) -> list[tuple[bytes, bytes, int]]:
    rng = random.Random(seed)
    base = 1_678_886_400
    out = []
    for i in range(n):
        user = rng.choice(USERS)
        out.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": base + i}), (base + i) * 1000))
    return out


def expected_counts(records: list[tuple[bytes, bytes, int]]) -> dict[str, int]:
    return dict(collections.Counter(r[0].decode() for r in records))


def print_counts(title: str, counts: dict[str, int], expected: dict[str, int]) -> bool:
    click.echo(f"{title:<10} {'user':<8} {'count':>7} {'expected':>9}")
    exact = True
    for user in sorted(expected):
        got = counts.get(user)
        ok = got == expected[user]
        exact &= ok
        click.echo(
            f"{'':<10} {user:<8} {got if got is not None else '-':>7} {expected[user]:>9}  {'ok' if ok else 'WRONG'}"
        )
    extra = set(counts) - set(expected)
    if extra:
        click.echo(f"unexpected users in the output: {sorted(extra)}")
        exact = False
    return exact


@click.command()
@click.option("--events", default=20_000, show_default=True, help="Clicks to produce in each phase")
@click.option("--workers", default=2, show_default=True)
def main(events: int, workers: int) -> None:
    """Run the click counter on the local stack and check its counts."""
    started = time.monotonic()
    say(
        "Local stack: Kafka (KRaft), etcd, kube-apiserver, controllers, helm (installed once into ~/.cache/baton)"
    )
    spent = stack.up_components(["kafka", "kube", "helm"])
    click.echo(", ".join(f"{k} ready in {v:.1f}s" for k, v in spent.items()))

    bootstrap = kafka.bootstrap()
    run = uuid.uuid4().hex[:6]
    clicks_topic, counts_topic, app_id = (
        f"demo-clicks-{run}",
        f"demo-user-counts-{run}",
        f"demo-click-counter-{run}",
    )
    say(f"Topics {clicks_topic} (8 partitions) and {counts_topic}")
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(clicks_topic, 8, 1), NewTopic(counts_topic, 8, 1)]).values():
        fut.result(30)

    env = {"CLICKS_TOPIC": clicks_topic, "COUNTS_TOPIC": counts_topic}
    with tempfile.TemporaryDirectory(prefix="baton-demo-") as tmpd:
        tmp = Path(tmpd)
        say(f"{workers} workers of examples/click_counter.py, exactly-once, application.id {app_id}")
        procs = [
            WorkerProcess(
                str(REPO / "examples" / "click_counter.py"),
                bootstrap=bootstrap,
                application_id=app_id,
                state_dir=tmp / f"state-{i}",
                log_path=tmp / f"worker-{i}.log",
                instance_id=f"worker-{i}",
                env=env,
            ).start()
            for i in range(workers)
        ]
        try:
            for p in procs:
                p.wait_ready(120)
            data = clicks(events, seed=1)
            say(f"Producing {len(data):,} clicks for {len(USERS)} users")
            produce(bootstrap, clicks_topic, data)
            expected = expected_counts(data)

            def counts() -> dict[str, int]:
                latest = latest_by_key(read_all(bootstrap, counts_topic))
                return {k.decode(): int(orjson.loads(v)) for k, v in latest.items() if k and v}

            say("Waiting for the counts in user_counts (read_committed)")
            with contextlib.suppress(TimeoutError):  # on timeout the table below shows what is wrong
                wait_for(lambda: counts() == expected, 180, "exact counts")
            exact = print_counts("counts", counts(), expected)
        finally:
            for p in procs:
                p.stop()
    for fut in admin.delete_topics([clicks_topic, counts_topic]).values():
        fut.result(30)
    say(
        f"Summary: {events:,} clicks, {len(USERS)} users, counts {'EXACT' if exact else 'WRONG'} "
        f"({time.monotonic() - started:.0f}s)"
    )
    sys.exit(0 if exact else 1)


if __name__ == "__main__":
    main()
