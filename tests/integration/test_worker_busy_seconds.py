"""baton_busy_seconds_total on the real broker: it counts the processing loop's work, not its
waits in poll, which is what the operator's autoscaler divides by the elapsed time.

One worker of the failover bench's stalling click counter: idle on an empty topic, then one
record whose user code sleeps STALL_SECONDS (the GIL released, as a slow remote call would).
The loop polls with a 50 ms timeout, so an idle worker spends nearly all its time waiting;
a record that holds the loop for STALL_SECONDS adds at least that much, since the counter
runs from the end of one poll to the start of the next.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import REPO

from baton.testing import WorkerProcess, produce, wait_for

pytestmark = pytest.mark.integration

STALLING = REPO / "bench" / "topologies" / "stalling_click_counter.py"
STALL_SECONDS = 3.0
BUSY = "baton_busy_seconds_total"


def test_busy_seconds_grow_while_processing_and_stay_flat_while_idle(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(1, name=f"{unique_name}-clicks")
    sink = new_topic(1, name=f"{unique_name}-counts")
    flag = tmp_path / "stall"
    worker = WorkerProcess(
        STALLING,
        bootstrap=kafka_bootstrap,
        application_id=unique_name,
        state_dir=tmp_path / "state",
        log_path=tmp_path / "w.log",
        env={
            "CLICKS_TOPIC": source,
            "COUNTS_TOPIC": sink,
            "STALL_FLAG": str(flag),
            "STALL_SECONDS": str(STALL_SECONDS),
        },
    ).start()

    def click(i: int) -> None:
        produce(
            kafka_bootstrap, source, [(b"u", orjson.dumps({"user_id": "u", "timestamp": 1678886400 + i}))]
        )

    try:
        worker.wait_ready(60)
        click(0)  # the first record's path (the task's producer, its first commit) is warm
        wait_for("the first record processed", lambda: worker.metric("baton_records_consumed_total") == 1, 30)

        # idle: the loop waits in poll nearly all the time
        busy0, t0 = worker.metric(BUSY), time.monotonic()
        time.sleep(STALL_SECONDS)
        busy1, t1 = worker.metric(BUSY), time.monotonic()
        idle = (busy1 - busy0) / (t1 - t0)
        assert busy1 > 0  # it counts from the loop's start: the first record and commits took some
        assert idle < 0.25, f"an idle worker reported {idle:.0%} busy"

        # saturated: one record holds the loop for STALL_SECONDS, all of it counted
        flag.touch()
        click(1)
        got = wait_for(
            f"{STALL_SECONDS}s of busy seconds for a record that held the loop that long",
            lambda: d if (d := worker.metric(BUSY) - busy1) >= STALL_SECONDS else None,
            30,
            every=0.5,
            detail=lambda: f"busy seconds since idle: {worker.metric(BUSY) - busy1:.2f}",
        )
        print(f"idle: {idle:.1%} busy over {t1 - t0:.1f}s; stalled record: +{got:.2f} busy seconds")
        assert worker.metric("baton_records_consumed_total") == 2
        assert worker.stop(timeout=30) == 0
    finally:
        if worker.alive:
            worker.kill()
