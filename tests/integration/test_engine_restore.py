"""Restore: an intact state dir replays only the changelog tail; a wiped one replays everything."""

from __future__ import annotations

import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER

from baton.testing import WorkerProcess, end_offsets, latest_by_key, produce, read_all, wait_for

pytestmark = pytest.mark.integration


def _batch(start: int, n: int, users: int) -> list[tuple[bytes, bytes]]:
    return [
        (f"u{i % users}".encode(), orjson.dumps({"user_id": f"u{i % users}", "timestamp": i}))
        for i in range(start, start + n)
    ]


def _counts(bootstrap: str, topic: str) -> dict[str, int]:
    return {
        k.decode(): int(v)
        for k, v in latest_by_key(read_all(bootstrap, topic)).items()
        if k is not None and v is not None
    }


def test_restore_replays_only_the_tail_and_everything_after_a_wipe(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(4, name=f"{unique_name}-clicks")
    sink = new_topic(4, name=f"{unique_name}-counts")
    changelog = f"{unique_name}-user-counts-store-changelog"
    env = {"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink}
    expected: Counter[str] = Counter()

    def worker(state: str, log: str) -> WorkerProcess:
        return WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=unique_name,
            state_dir=tmp_path / state,
            log_path=tmp_path / log,
            instance_id="w",
            env=env,
            extra_args=["--no-write-cache"],
        )

    def restored(w: WorkerProcess, want: int) -> int:
        """Records restored once the worker has its partitions: with static membership the first
        assignment after a restart can be empty (ready, no tasks yet), so readiness alone is not it."""
        w.wait_ready()
        wait_for(
            f"{w.log_path.name}: restored {w.restored()} of {want}",
            lambda: w.restored() >= want,
            60,
            every=0.2,
        )
        return w.restored()

    def run_batch(w: WorkerProcess, start: int, n: int, users: int) -> None:
        batch = _batch(start, n, users)
        expected.update(k.decode() for k, _ in batch)
        produce(kafka_bootstrap, source, batch)
        wait_for(
            "counts never matched", lambda: _counts(kafka_bootstrap, sink) == dict(expected), 60, every=1
        )

    # 1. worker A processes 3,000 events from empty state: nothing to restore
    a = worker("a", "a.log").start()
    a.wait_ready()
    run_batch(a, 0, 3000, 50)
    assert a.stop() == 0
    assert a.restored() == 0
    after_a = end_offsets(kafka_bootstrap, changelog)

    # 2. worker B, with an empty state dir of its own, restores all of A's changelog, then adds 500 events
    b = worker("b", "b.log").start()
    assert restored(b, 3000) == len(read_all(kafka_bootstrap, changelog)) == 3000  # cache off: one per update
    run_batch(b, 3000, 500, 50)
    assert b.stop() == 0
    tail = len(read_all(kafka_bootstrap, changelog, start=after_a))
    assert tail == 500

    # 3. worker A again with its state dir intact: it replays only B's 500 changelog records
    a.start()
    assert restored(a, tail) == tail
    assert a.metric("baton_restored_records_total") == tail
    # what was left to restore, per store: set while it ran, 0 once the task is active
    wait_for(
        "the remaining-records gauge at 0",
        lambda: (
            "baton_restore_remaining_records{" in a.http("/metrics", a.port())[1]
            and a.metric("baton_restore_remaining_records") == 0
        ),
        30,
    )
    run_batch(a, 3500, 100, 50)
    # the stores' sizes as RocksDB reports them: 50 users over the 4 active tasks' stores
    metrics = a.http("/metrics", a.port())[1]
    assert 'baton_store_estimated_keys{role="active",store="user-counts-store",task="0_' in metrics
    assert a.metric("baton_store_estimated_keys") >= 50
    assert a.metric("baton_store_block_cache_capacity_bytes") > 0
    # end-to-end latency: one observation per task and commit, from record time to a durable output
    assert a.metric("baton_e2e_latency_seconds_count") > 0
    assert a.metric("baton_e2e_latency_seconds_sum") > 0
    assert a.stop() == 0

    # 4. A's state dir wiped: it restores the whole changelog and goes on with the same counts
    shutil.rmtree(tmp_path / "a")
    total = len(read_all(kafka_bootstrap, changelog))
    a.start()
    assert restored(a, total) == total == 3600
    run_batch(a, 3600, 100, 50)
    assert _counts(kafka_bootstrap, sink) == dict(expected)
    assert sum(expected.values()) == 3700
    assert a.stop() == 0
