"""The Kafka client options every ``baton`` command takes: ``--kafka-config-file`` and ``-X``.

One spelling for all of them (``baton run``, ``flip``, ``status``, ``compact``), so a user
who has a ``client.properties`` for their cluster passes the same file everywhere.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from baton.cli_options import key_values
from baton.clients.properties import PropertiesFileError, read_properties
from baton.clients.settings import Client, KafkaSettings, SettingRefused

F = TypeVar("F", bound=Callable[..., Any])


def kafka_options(func: F) -> F:
    """Add ``--kafka-config-file`` (``BATON_KAFKA_CONFIG_FILE``) and ``-X key=value``."""
    func = click.option(
        "-X",
        "--kafka-config",
        "kafka_config",
        multiple=True,
        callback=key_values,
        help="A librdkafka setting key=value (repeatable), over the file's; e.g. security.protocol=SASL_SSL. "
        "Prefix consumer./producer. to target one client.",
    )(func)
    func = click.option(
        "--kafka-config-file",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar="BATON_KAFKA_CONFIG_FILE",
        help="A properties file of librdkafka settings (as a client.properties: security.protocol, "
        "ssl.*, sasl.*), for every Kafka client this command opens.",
    )(func)
    return func


def settings_from_options(
    bootstrap_servers: str,
    kafka_config_file: Path | None,
    kafka_config: dict[str, str],
    clients: Iterable[Client],
    *extra: dict[str, str],
) -> KafkaSettings:
    """The command's settings, or click's usage error naming the setting (or file) at fault."""
    try:
        layers = [*extra]
        if kafka_config_file is not None:
            layers.append(read_properties(kafka_config_file))
        layers.append(kafka_config)
        return KafkaSettings.of(bootstrap_servers, *layers, clients=clients)
    except (PropertiesFileError, SettingRefused) as exc:
        raise click.UsageError(str(exc)) from exc
