"""Workers killed at random while input keeps arriving: the crash tests' common harness."""

from __future__ import annotations

import random
import signal
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from baton.testing import WorkerProcess, produce
from baton.worker.processes.supervisor import free_ports


def start_workers(
    module: str,
    *,
    bootstrap: str,
    app: str,
    tmp_path: Path,
    env: dict[str, str],
    count: int = 2,
    guarantee: str = "exactly_once_v2",
    extra: Sequence[str] = (),
    stable_ports: bool = False,
) -> list[WorkerProcess]:
    """``count`` workers of one app, committing every 200 ms, failure detected in 6 s.

    ``stable_ports``: each keeps one HTTP port across restarts, as a pod keeps its name and
    port (interactive queries route to the address a member advertised when it joined).
    """
    ports = free_ports(count) if stable_ports else [0] * count
    return [
        WorkerProcess(
            module,
            bootstrap=bootstrap,
            application_id=app,
            state_dir=tmp_path / f"s{i}",
            log_path=tmp_path / f"w{i}.log",
            instance_id=f"w{i}",
            guarantee=guarantee,
            env=env,
            extra_args=[
                *(
                    "--commit-interval-ms",
                    "200",
                    "-X",
                    "session.timeout.ms=6000",
                    "--metrics-port",
                    str(ports[i]),
                ),
                *extra,
            ],
        ).start()
        for i in range(count)
    ]


def feed_while_killing(
    workers: list[WorkerProcess],
    *,
    bootstrap: str,
    topic: str,
    records: Sequence[tuple[bytes, bytes]],
    chunk: int,
    min_kills: int,
    seed: int,
) -> int:
    """Produce ``records`` in chunks 0.4 s apart while SIGKILLing a random worker every 0.8-2.5 s.

    Kills land mid-batch, mid-commit and mid-restore. Each victim restarts at once with
    its state directory. Returns the number of kills (at least ``min_kills``, and the
    killing goes on until all input is produced).
    """

    def feed() -> None:
        for i in range(0, len(records), chunk):
            produce(bootstrap, topic, records[i : i + chunk])
            time.sleep(0.4)

    feeder = threading.Thread(target=feed)
    feeder.start()
    rng = random.Random(seed)
    kills = 0
    try:
        while feeder.is_alive() or kills < min_kills:
            time.sleep(rng.uniform(0.8, 2.5))
            victim = workers[rng.randrange(len(workers))]
            victim.kill(signal.SIGKILL)
            victim.wait(10)
            kills += 1
            victim.start()
    finally:
        feeder.join()
    return kills


def feed_topics_while_killing(
    workers: list[WorkerProcess],
    *,
    bootstrap: str,
    feeds: Sequence[tuple[str, Sequence[tuple[bytes, bytes]], int]],
    min_kills: int,
) -> int:
    """``feed_while_killing`` for several topics, one after the other: (topic, records, chunk) each,
    at least ``min_kills`` kills during each; returns the kills in all."""
    kills = 0
    for topic, records, chunk in feeds:
        kills += feed_while_killing(
            workers,
            bootstrap=bootstrap,
            topic=topic,
            records=records,
            chunk=chunk,
            min_kills=min_kills,
            seed=kills,
        )
    return kills
