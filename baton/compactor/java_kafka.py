"""Spark's Kafka source options from the one set of client settings.

The compactor takes the same settings as the workers (``--kafka-config-file``, ``-X``,
``BATON_KAFKA_CONFIG``: librdkafka names). Spark's Kafka source is the Java client, which
spells TLS and SASL differently and ignores unknown names with only a warning, so a SASL job
would fail to authenticate with nothing in its log saying why. The translation lives in
:meth:`baton.clients.settings.KafkaSettings.java`, which refuses what it cannot carry by name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from baton.clients.settings import KafkaSettings


def java_client_config(
    settings: Mapping[str, str], read: Callable[[str], str] | None = None
) -> dict[str, str]:
    """The Java client's settings (without Spark's ``kafka.`` prefix) for librdkafka ``settings``."""
    return KafkaSettings("", dict(settings)).java(read)


def spark_kafka_options(
    settings: Mapping[str, str], read: Callable[[str], str] | None = None
) -> dict[str, str]:
    """Options of Spark's Kafka source: the Java client's settings prefixed ``kafka.``."""
    return {f"kafka.{k}": v for k, v in java_client_config(settings, read).items()}
