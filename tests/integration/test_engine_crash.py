"""SIGKILL at random moments: exactly-once keeps exact, monotonic counts; at-least-once loses nothing."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest
from batondev.paths import CLICK_COUNTER

from baton.testing import read_all, wait_for
from tests.support.kills import feed_while_killing, start_workers

pytestmark = pytest.mark.integration

EVENTS = 40_000
USERS = 200
KILLS = 6


def _records(seed: int) -> tuple[list[tuple[bytes, bytes]], Counter[str]]:
    rng = random.Random(seed)
    out, expected = [], Counter[str]()
    for i in range(EVENTS):
        user = f"u{rng.randrange(USERS)}"
        out.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": i})))
        expected[user] += 1
    return out, expected


def _run_with_kills(
    *,
    bootstrap: str,
    source: str,
    sink: str,
    app: str,
    tmp_path: Path,
    guarantee: str,
    expected: Counter[str],
    records: list[tuple[bytes, bytes]],
    extra: tuple[str, ...] = (),
) -> dict[str, list[int]]:
    workers = start_workers(
        str(CLICK_COUNTER),
        bootstrap=bootstrap,
        app=app,
        tmp_path=tmp_path,
        env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
        guarantee=guarantee,
        extra=extra,
    )
    try:
        kills = feed_while_killing(
            workers, bootstrap=bootstrap, topic=source, records=records, chunk=2000, min_kills=KILLS, seed=7
        )

        def final() -> dict[str, list[int]] | None:
            seq: dict[str, list[int]] = {}
            for r in read_all(bootstrap, sink):
                assert r.key is not None and r.value is not None
                seq.setdefault(r.key.decode(), []).append(int(r.value))
            last = {k: v[-1] for k, v in seq.items()}
            done = (
                last == dict(expected)
                if guarantee == "exactly_once_v2"
                else (set(last) == set(expected) and all(last[k] >= n for k, n in expected.items()))
            )
            return seq if done else None

        result = wait_for("output never converged", final, 180, every=2)
        assert kills >= 5
        return result
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)


@pytest.mark.parametrize(
    "extra",
    # a write cache bounded to ~15 dirty keys: stores flush mid-interval, inside the transaction
    [(), ("--cache-max-bytes", "2000")],
    ids=["default-cache", "bounded-cache"],
)
def test_exactly_once_survives_sigkills(
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
    extra: tuple[str, ...],
) -> None:
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    records, expected = _records(seed=3)
    sequences = _run_with_kills(
        bootstrap=kafka_bootstrap,
        source=source,
        sink=sink,
        app=unique_name,
        tmp_path=tmp_path,
        guarantee="exactly_once_v2",
        expected=expected,
        records=records,
        extra=extra,
    )
    assert {k: v[-1] for k, v in sequences.items()} == dict(expected)
    for user, counts in sequences.items():  # read_committed output: no count ever repeats or goes backwards
        assert all(a < b for a, b in itertools.pairwise(counts)), (
            f"{user} repeated or went backwards: {counts}"
        )


def test_at_least_once_loses_nothing_under_sigkills(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(8, name=f"{unique_name}-clicks")
    sink = new_topic(8, name=f"{unique_name}-counts")
    records, expected = _records(seed=4)
    sequences = _run_with_kills(
        bootstrap=kafka_bootstrap,
        source=source,
        sink=sink,
        app=unique_name,
        tmp_path=tmp_path,
        guarantee="at_least_once",
        expected=expected,
        records=records,
    )
    final = {k: v[-1] for k, v in sequences.items()}
    assert all(final[user] >= n for user, n in expected.items())
