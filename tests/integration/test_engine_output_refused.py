"""Output records the broker refuses: dead-lettered (or the worker stops), never an endless loop.

The sink topic takes records of at most 1,000 bytes; the counts of users named ``big*``
carry 5,000 bytes of padding, so the broker refuses them (MESSAGE_TOO_LARGE) after
librdkafka accepted them. Under exactly-once the transaction then aborts and the input is
replayed; before the production error handler the replay failed the same way for ever.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import FIXTURES

from baton.testing import WorkerProcess, produce, read_all, wait_for

pytestmark = pytest.mark.integration

TOPOLOGY = str(FIXTURES / "padded_click_counter.py")


def _clicks() -> tuple[list[tuple[bytes, bytes]], int]:
    records, big = [], 0
    for i in range(600):
        user = f"u{i % 12}"
        records.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": i})))
        if i % 200 == 100:  # three clicks of one big user among the others
            records.append((b"big1", orjson.dumps({"user_id": "big1", "timestamp": i})))
            big += 1
    return records, big


@pytest.mark.parametrize("guarantee", ["exactly_once_v2", "at_least_once"])
def test_refused_output_goes_to_the_dlq_and_the_rest_is_exact(
    guarantee: str, kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(2, name=f"{unique_name}-clicks")
    sink = new_topic(2, name=f"{unique_name}-counts", config={"max.message.bytes": "1000"})
    records, big = _clicks()
    produce(kafka_bootstrap, source, records)
    worker = WorkerProcess(
        TOPOLOGY, bootstrap=kafka_bootstrap, application_id=unique_name, state_dir=tmp_path / "s",
        log_path=tmp_path / "w.log", guarantee=guarantee, env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink,
        # at-least-once commits every 30 s by default (Kafka Streams' value): each of the two
        # commits that see the refusal would wait that long
        "BATON_COMMIT_INTERVAL_MS": "1000"},
    ).start()  # fmt: skip
    try:
        dlq = f"{unique_name}-dlq"
        users = {f"u{i}".encode() for i in range(12)}
        wait_for(
            "nothing reached the DLQ", lambda: worker.alive and read_all(kafka_bootstrap, dlq), 90, every=1
        )
        wait_for(
            "counts missing", lambda: {r.key for r in read_all(kafka_bootstrap, sink)} >= users, 60, every=1
        )
        dead = read_all(kafka_bootstrap, dlq)
        # the write cache sends one count per key and commit: each refused count is one dead letter,
        # whose headers name the input record that last updated it (always a click of big1)
        inputs = {(r.partition, r.offset): r.key for r in read_all(kafka_bootstrap, source)}
        assert 1 <= len(dead) <= big, [r.headers for r in dead]
        for r in dead:
            h = r.headers
            assert h["baton.error.stage"] == b"produce" and b"MSG_SIZE_TOO_LARGE" in h["baton.error"], h
            assert h["baton.source.topic"] == source.encode()
            assert inputs[(int(h["baton.source.partition"]), int(h["baton.source.offset"]))] == b"big1", h
        counts: dict[bytes, list[int]] = {}
        for r in read_all(kafka_bootstrap, sink):
            assert r.key is not None
            counts.setdefault(r.key, []).append(int(orjson.loads(r.value or b"")["count"]))
        assert b"big1" not in counts
        assert {k: v[-1] for k, v in counts.items()} == dict.fromkeys(users, 50)  # batch mates not lost
        if guarantee == "exactly_once_v2":
            for key, seq in counts.items():
                assert all(a < b for a, b in itertools.pairwise(seq)), (key, seq)
        assert worker.alive
        # counted when sent: a dead letter sent in a transaction that then aborted counts too
        assert worker.metric('baton_dlq_records_total{stage="produce"}') >= len(dead)
    finally:
        worker.stop(30)


def test_refused_output_stops_the_worker_under_the_fail_handler(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(1, name=f"{unique_name}-clicks")
    sink = new_topic(1, name=f"{unique_name}-counts", config={"max.message.bytes": "1000"})
    produce(kafka_bootstrap, source, [(b"big1", orjson.dumps({"user_id": "big1", "timestamp": 1}))])
    worker = WorkerProcess(
        TOPOLOGY, bootstrap=kafka_bootstrap, application_id=unique_name, state_dir=tmp_path / "s",
        log_path=tmp_path / "w.log", env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
        extra_args=["--error-handler", "fail"],
    ).start()  # fmt: skip
    code = worker.wait(90)
    assert code != 0
    failed = [x for x in worker.logs() if x.get("msg") == "worker failed"]
    assert failed and "MSG_SIZE_TOO_LARGE" in str(failed[0].get("error")), failed
    assert read_all(kafka_bootstrap, sink) == []
