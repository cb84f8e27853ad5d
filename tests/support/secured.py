"""The stack broker's secured listeners as a user configures them: a client.properties file each."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import javaproperties
import orjson
from batondev import kafka as stack_kafka
from batondev import oidc, tls

from tests.support.counts import assert_strictly_increasing, sequences_if_exact

LISTENERS = ("mtls", "sasl-ssl-scram-sha-512", "oauthbearer")


def listener(name: str) -> tuple[str, dict[str, str]]:
    """(bootstrap, librdkafka settings) of one secured listener, as the stack's own principal."""
    if name == "mtls":
        return stack_kafka.mtls_bootstrap(), tls.stack_client().settings()
    if name == "sasl-ssl-scram-sha-512":
        return stack_kafka.sasl_ssl_bootstrap(), {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": stack_kafka.SCRAM_USER,
            "sasl.password": stack_kafka.SCRAM_PASSWORD,
            "ssl.ca.location": str(tls.ca_file()),
        }
    if name == "oauthbearer":
        return stack_kafka.oauth_bootstrap(), oauth_settings(
            oidc.STACK_CLIENT, oidc.CLIENTS[oidc.STACK_CLIENT]
        )
    raise KeyError(name)


def oauth_settings(client_id: str, secret: str) -> dict[str, str]:
    return {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.oauthbearer.method": "oidc",
        "sasl.oauthbearer.client.id": client_id,
        "sasl.oauthbearer.client.secret": secret,
        "sasl.oauthbearer.token.endpoint.url": oidc.token_endpoint(),
        "ssl.ca.location": str(tls.ca_file()),
    }


def properties_file(settings: dict[str, str], path: Path) -> Path:
    """``settings`` written as a Java properties file: what ``--kafka-config-file`` reads."""
    with path.open("w", encoding="utf-8") as f:
        javaproperties.dump(settings, f, timestamp=False)
    return path


def clicks(users: int, events: int, start: int = 0) -> list[tuple[bytes, bytes]]:
    """``events`` clicks spread over ``users`` users, user ``i % users`` for event ``i``."""
    out = []
    for i in range(start, start + events):
        user = f"u{i % users}"
        out.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": i})))
    return out


def exact_sequences(bootstrap: str, sink: str, expected: Counter[str]) -> dict[str, list[int]] | None:
    """Each user's committed counts once the last ones equal ``expected``, checked strictly
    increasing (a duplicate under exactly-once fails here)."""
    sequences = sequences_if_exact(bootstrap, sink, expected)
    if sequences is not None:
        assert_strictly_increasing(sequences)
    return sequences
