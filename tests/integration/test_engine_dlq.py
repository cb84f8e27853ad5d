"""Bad records: malformed JSON and wrong types go to the DLQ with headers; `fail` stops the worker."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER

from baton.testing import WorkerProcess, latest_by_key, produce, read_all, wait_for

pytestmark = pytest.mark.integration


BAD = [
    b"{not json",
    b'{"user_id": "u1", "timestamp": "yesterday"}',  # wrong type
    b'["u1", 1678886400]',  # not an object
    b'{"user_id": 42, "timestamp": 1}',  # wrong type
    b'{"timestamp": 1}',  # missing field
    b"",
]


def _input() -> tuple[list[tuple[bytes, bytes]], Counter[str], list[bytes]]:
    records, expected, injected = [], Counter[str](), []
    for i in range(3000):
        user = f"u{i % 37}"
        records.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": i})))
        expected[user] += 1
        if i % 100 == 50:
            bad = BAD[(i // 100) % len(BAD)]
            records.append((user.encode(), bad))
            injected.append(bad)
    return records, expected, injected


def test_bad_records_go_to_the_dlq_with_headers_and_processing_continues(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(4, name=f"{unique_name}-clicks")
    sink = new_topic(4, name=f"{unique_name}-counts")
    records, expected, injected = _input()
    produce(kafka_bootstrap, source, records)
    w = WorkerProcess(
        CLICK_COUNTER,
        bootstrap=kafka_bootstrap,
        application_id=unique_name,
        state_dir=tmp_path / "s",
        log_path=tmp_path / "w.log",
        env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
    ).start()
    try:

        def counted() -> bool:
            latest = latest_by_key(read_all(kafka_bootstrap, sink))
            return {k.decode(): int(v) for k, v in latest.items() if k and v} == dict(expected)

        wait_for("valid records were not all counted", counted, 60, every=1)
        dead = read_all(kafka_bootstrap, f"{unique_name}-dlq")
        assert len(dead) == len(injected) == 30
        assert sorted(r.value or b"" for r in dead) == sorted(injected)
        inputs = {(r.partition, r.offset): r.value for r in read_all(kafka_bootstrap, source)}
        for r in dead:
            assert r.headers["baton.source.topic"] == source.encode()
            partition, offset = (
                int(r.headers["baton.source.partition"]),
                int(r.headers["baton.source.offset"]),
            )
            assert inputs[(partition, offset)] == r.value  # the headers point at the very record
            assert r.headers["baton.error.stage"] == b"deserialize"
            assert b"SerdeError" in r.headers["baton.error"]
        assert w.metric("baton_dlq_records_total") == 30
    finally:
        assert w.stop() == 0


def test_fail_handler_stops_the_worker_on_a_bad_record(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(1, name=f"{unique_name}-clicks")
    sink = new_topic(1, name=f"{unique_name}-counts")
    produce(
        kafka_bootstrap, source, [(b"u1", orjson.dumps({"user_id": "u1", "timestamp": 1})), (b"u1", b"{oops")]
    )
    w = WorkerProcess(
        CLICK_COUNTER,
        bootstrap=kafka_bootstrap,
        application_id=unique_name,
        state_dir=tmp_path / "s",
        log_path=tmp_path / "w.log",
        env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
        extra_args=["--error-handler", "fail"],
    ).start()
    assert w.wait(60) == 1
    assert any(line.get("msg") == "worker failed" for line in w.logs())
    assert read_all(kafka_bootstrap, sink) == []  # the transaction holding the good record was aborted
