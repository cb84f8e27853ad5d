"""Event times for test data, and the check that the broker will not delete that data by age.

A record's timestamp is its event time: an extracted timestamp becomes the timestamp of
every record it produces (a session's final result, a join, a punctuator's tick), as in
Kafka Streams. The broker deletes a log segment once its newest timestamp is older than
the topic's ``retention.ms`` (7 days by default), at a retention check every 5 minutes.
Tests used to date their events from 1970 (``10**6`` ms, say): whenever that check fell
inside such a test, the outputs written so far vanished and the test timed out waiting
for windows that had been written exactly once (CI, 2026-11-26). Events dated from now
are what users have, and they stay.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000  # the broker's log.retention.hours=168


def event_time_origin(granularity_ms: int = 60_000) -> int:
    """Now in ms since the epoch, rounded down: where a test's event times start.

    Rounded so that window boundaries fall where they would from zero. Keep events within
    an hour of now: the broker refuses timestamps further ahead than
    ``log.message.timestamp.after.max.ms`` (1 hour since Kafka 4.0).
    """
    now = int(time.time() * 1000)
    return now - now % granularity_ms


def retention_ms(config: dict[str, str]) -> int | None:
    """How old a record of a topic with this config may get before the broker deletes it;
    None: never by age (compacted only, or retention -1)."""
    retention = int(config.get("retention.ms", DEFAULT_RETENTION_MS))
    return retention if "delete" in config.get("cleanup.policy", "delete") and retention >= 0 else None


def expiring(
    newest: Iterable[tuple[str, int, int]], now_ms: int, retention_ms: int = DEFAULT_RETENTION_MS
) -> list[str]:
    """Partitions whose newest record is past retention: (topic, partition, newest timestamp)
    in, "topic[partition]" out for each one the broker would empty at its next check
    (a timestamp below zero: the partition is empty)."""
    return [f"{topic}[{partition}]" for topic, partition, ts in newest if 0 <= ts < now_ms - retention_ms]
