"""The worker's client settings: Baton's defaults (the consumer's fetch backoff, the member's heartbeat)
reach only the clients they are for, and yield to the user's."""

from __future__ import annotations

import pytest

from baton.worker.config import WorkerConfig
from baton.worker.runtime.clients import ClientSettings

pytestmark = pytest.mark.unit


def _clients(zone: str | None = None, **kafka_config: str) -> ClientSettings:
    config = WorkerConfig(
        topology="examples/click_counter.py",
        bootstrap_servers="kafka:9092",
        application_id="clicks",
        kafka_config=kafka_config,
        zone=zone,
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


def test_a_worker_with_a_zone_fetches_from_its_zone() -> None:
    """client.rack (KIP-392) on the consumers (the data consumer's settings are the restore and
    standby consumer's too); a producer fetches nothing, and a worker without a zone sets none."""
    clients = _clients(zone="eu-west-1b")
    assert clients.consumer()["client.rack"] == "eu-west-1b"
    assert "client.rack" not in clients.producer()
    assert "client.rack" not in _clients().consumer()


@pytest.mark.parametrize("key", ["client.rack", "consumer.client.rack"])
def test_the_users_client_rack_wins_over_the_zone(key: str) -> None:
    assert _clients(zone="eu-west-1b", **{key: "use1-az2"}).consumer()["client.rack"] == "use1-az2"
