"""The worker's client settings: Baton's defaults (the consumer's fetch backoff, the member's heartbeat)
reach only the clients they are for, and yield to the user's."""

from __future__ import annotations

import pytest

from baton.worker.config import WorkerConfig
from baton.worker.runtime.clients import ClientSettings

pytestmark = pytest.mark.unit


def _clients(**kafka_config: str) -> ClientSettings:
    config = WorkerConfig(
        topology="examples/click_counter.py",
        bootstrap_servers="kafka:9092",
        application_id="clicks",
        kafka_config=kafka_config,
    )
    return ClientSettings(config, "blue-0")


def test_the_consumer_backs_off_100_ms_not_librdkafkas_second() -> None:
    clients = _clients()
    assert clients.consumer()["fetch.queue.backoff.ms"] == 100
    # a producer given a consumer-only property logs a warning on every start
    assert "fetch.queue.backoff.ms" not in clients.producer()
    assert "fetch.queue.backoff.ms" not in clients.shared()


@pytest.mark.parametrize("key", ["fetch.queue.backoff.ms", "consumer.fetch.queue.backoff.ms"])
def test_the_users_setting_wins(key: str) -> None:
    clients = _clients(**{key: "1000"})
    assert clients.consumer()["fetch.queue.backoff.ms"] == "1000"
    assert "fetch.queue.backoff.ms" not in clients.producer()


def test_the_group_member_heartbeats_every_second_unless_told_otherwise() -> None:
    assert _clients().membership()["heartbeat_interval_ms"] == 1000
    assert (
        _clients(**{"consumer.heartbeat.interval.ms": "3000"}).membership()["heartbeat_interval_ms"] == 3000
    )
