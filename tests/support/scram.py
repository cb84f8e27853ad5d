"""SCRAM credentials of the stack's broker, as a Secret and as a StreamApp that uses it."""

from __future__ import annotations

from typing import Any

from batondev import kafka as stack_kafka

from baton.operator.core.spec import StreamApp

SECRET = {"username": stack_kafka.SCRAM_USER, "password": stack_kafka.SCRAM_PASSWORD}


def scram(username: str, password: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": stack_kafka.scram_bootstrap(),
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": username,
        "sasl.password": password,
    }


def app_with_secret() -> StreamApp:
    return StreamApp.from_body(
        {
            "apiVersion": "baton.dev/v1alpha1",
            "kind": "StreamApp",
            "metadata": {"name": "scram-app", "namespace": "apps"},
            "spec": {
                "image": "ghcr.io/baton-dev/baton:0.1.0",
                "topology": "examples.click_counter:topology",
                "kafka": {
                    "bootstrapServers": stack_kafka.scram_bootstrap(),
                    "securityProtocol": "SASL_PLAINTEXT",
                    "saslMechanism": "SCRAM-SHA-512",
                    "secretRef": {"name": "kafka-scram"},
                },
            },
        }
    )
