"""The retention rule the ``new_topic`` fixture applies to test data (tests/support/event_time.py)."""

from __future__ import annotations

import time

from tests.support.event_time import DEFAULT_RETENTION_MS, event_time_origin, expiring, retention_ms

NOW = 1_795_700_000_000


def test_a_partition_is_flagged_only_when_its_newest_record_is_past_retention() -> None:
    newest = [
        ("a", 0, 1_000_000),  # 1970: the broker empties it at its next check
        ("a", 1, NOW - DEFAULT_RETENTION_MS - 1),
        ("a", 2, NOW - DEFAULT_RETENTION_MS),  # exactly at the edge: kept
        ("a", 3, NOW),
        ("b", 0, -1),  # empty partition
    ]
    assert expiring(newest, NOW) == ["a[0]", "a[1]"]


def test_a_topic_s_own_retention_decides() -> None:
    assert expiring([("t", 0, NOW - 61_000)], NOW, retention_ms=60_000) == ["t[0]"]
    assert expiring([("t", 0, NOW - 59_000)], NOW, retention_ms=60_000) == []


def test_the_origin_is_now_on_a_window_boundary() -> None:
    before = int(time.time() * 1000)
    origin = event_time_origin(1000)
    assert origin % 1000 == 0
    assert before - 1000 < origin <= int(time.time() * 1000)
    assert expiring([("t", 0, origin)], int(time.time() * 1000)) == []


def test_only_topics_that_delete_by_age_have_a_retention() -> None:
    assert retention_ms({}) == DEFAULT_RETENTION_MS
    assert retention_ms({"retention.ms": "60000"}) == 60_000
    assert retention_ms({"cleanup.policy": "compact,delete"}) == DEFAULT_RETENTION_MS
    assert retention_ms({"cleanup.policy": "compact"}) is None
    assert retention_ms({"retention.ms": "-1"}) is None
