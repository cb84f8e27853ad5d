"""SASL/SCRAM-SHA-512 against the real broker's SASL_PLAINTEXT listener (dev/stack).

Three clients: a plain confluent-kafka client; the settings Baton's builders give a worker
(with $(VAR) references expanded from the Secret, as the kubelet does); and the operator's
AdminClient settings. A wrong password must be refused by the broker, not time out.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from batondev import kafka as stack_kafka
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient

from baton.operator import topics
from baton.operator.core.builders import kafka_access
from baton.operator.core.builders.env import SASL_PASSWORD_VAR, SASL_USERNAME_VAR, kafka_config
from tests.support.scram import SECRET, app_with_secret, scram

pytestmark = pytest.mark.integration


def round_trip(config: dict[str, Any], topic: str, n: int = 20) -> list[bytes]:
    """Produce n records and read them back, both with ``config``."""
    producer = Producer({**config, "enable.idempotence": True})
    for i in range(n):
        producer.produce(topic, key=str(i).encode(), value=f"v{i}".encode())
    assert producer.flush(30) == 0
    consumer = Consumer(
        {**config, "group.id": f"scram-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    try:
        for _ in range(120):
            msg = consumer.poll(0.5)
            if msg is None:
                if len(got) >= n:
                    break
                continue
            assert msg.error() is None, msg.error()
            got.append(msg.value() or b"")
    finally:
        consumer.close()
    return got


def test_scram_client_produces_and_consumes(kafka_bootstrap: str, new_topic: Callable[..., str]) -> None:
    topic = new_topic(partitions=1)
    got = round_trip(scram(stack_kafka.SCRAM_USER, stack_kafka.SCRAM_PASSWORD), topic)
    assert got == [f"v{i}".encode() for i in range(20)]


def auth_errors(config: dict[str, Any], timeout: float = 15) -> list[KafkaError]:
    """Errors a producer with ``config`` reports until the first authentication error (or timeout)."""
    errors: list[KafkaError] = []
    conf: dict[str, Any] = {**config, "error_cb": errors.append, "log_level": 0}
    producer = Producer(conf)
    producer.produce("scram-refused", value=b"x")
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and not any(e.code() == KafkaError._AUTHENTICATION for e in errors):
        producer.poll(0.2)
    producer.purge()
    return errors


def test_wrong_password_is_refused(kafka_bootstrap: str) -> None:
    start = time.monotonic()
    errors = auth_errors(scram(stack_kafka.SCRAM_USER, "not-the-password"))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), [str(e) for e in errors]
    assert "invalid credentials" in " ".join(e.str() for e in errors)
    assert time.monotonic() - start < 10, "refused by the broker, not timed out"
    # An unknown user too; and the right password gets no authentication error.
    assert any(e.code() == KafkaError._AUTHENTICATION for e in auth_errors(scram("mallory", "x")))
    ok = auth_errors(scram(stack_kafka.SCRAM_USER, stack_kafka.SCRAM_PASSWORD), timeout=3)
    assert not any(e.code() == KafkaError._AUTHENTICATION for e in ok), [str(e) for e in ok]


def test_worker_settings_from_the_builders_authenticate(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """The worker's BATON_KAFKA_CONFIG, with the Secret's values where the kubelet puts them."""
    app = app_with_secret()
    values = {SASL_USERNAME_VAR: SECRET["username"], SASL_PASSWORD_VAR: SECRET["password"]}
    settings = {
        k: re.sub(r"\$\((\w+)\)", lambda m: values[m.group(1)], v) for k, v in kafka_config(app).items()
    }
    assert settings["sasl.mechanism"] == "SCRAM-SHA-512" and settings["security.protocol"] == "sasl_plaintext"
    topic = new_topic(partitions=1)
    got = round_trip({**settings, "bootstrap.servers": app.spec.kafka.bootstrap_servers}, topic, n=5)
    assert len(got) == 5


def test_operator_admin_settings_authenticate(kafka_bootstrap: str) -> None:
    app = app_with_secret()

    def settings(secret: dict[str, str]) -> dict[str, str]:
        return kafka_access.operator_settings(app.spec.kafka, {"kafka-scram": secret}, _no_files)

    admin = AdminClient(topics.admin_config(app, settings(SECRET)))
    metadata = admin.list_topics(timeout=15)
    assert metadata.brokers, "the operator's AdminClient reached the SCRAM listener"
    denied = auth_errors(topics.admin_config(app, settings({**SECRET, "password": "wrong"})))
    assert any(e.code() == KafkaError._AUTHENTICATION for e in denied), [str(e) for e in denied]


def _no_files(name: str, content: str) -> str:
    raise AssertionError(f"a SASL_PLAINTEXT app needs no file, yet {name} was written")
