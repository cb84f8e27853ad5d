"""One set of Kafka settings, three client libraries: what each gets, and what is refused by name."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
import trustme

from baton.clients.kafka_python import kafka_python_config
from baton.clients.oauth import ClientCredentialsTokenProvider
from baton.clients.properties import PropertiesFileError, read_properties
from baton.clients.settings import (
    COMPACTOR_CLIENTS,
    JAVA_OAUTH_CALLBACK,
    WORKER_CLIENTS,
    KafkaSettings,
    SettingRefused,
)

pytestmark = pytest.mark.unit

SCRAM = {
    "security.protocol": "sasl_ssl",
    "sasl.mechanism": "SCRAM-SHA-512",
    "sasl.username": "u",
    "sasl.password": "p",
}
OAUTH = {
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "OAUTHBEARER",
    "sasl.oauthbearer.method": "oidc",
    "sasl.oauthbearer.client.id": "app",
    "sasl.oauthbearer.client.secret": "s3cret",
    "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
    "sasl.oauthbearer.scope": "kafka",
}


def test_connection_settings_reach_every_librdkafka_role_and_tuning_only_its_own() -> None:
    settings = KafkaSettings.of(
        "k:9093",
        {**SCRAM, "consumer.fetch.max.bytes": "1", "producer.linger.ms": "7", "fetch.min.bytes": "2"},
        clients=WORKER_CLIENTS,
    )
    consumer, producer, admin = (settings.librdkafka(r) for r in ("consumer", "producer", "admin"))
    for conf in (consumer, producer, admin):
        assert conf["bootstrap.servers"] == "k:9093"
        assert conf["sasl.password"] == "p" and conf["security.protocol"] == "sasl_ssl"
    assert consumer["fetch.max.bytes"] == "1" and consumer["fetch.min.bytes"] == "2"
    assert "linger.ms" not in consumer  # a producer's tuning: librdkafka would warn on every start
    assert "consumer.fetch.max.bytes" not in consumer and "linger.ms" not in consumer
    assert producer["linger.ms"] == "7" and "fetch.min.bytes" not in producer
    assert "linger.ms" not in admin and "fetch.min.bytes" not in admin


def test_the_membership_client_gets_the_same_connection_in_its_own_names() -> None:
    settings = KafkaSettings.of(
        "a:1,b:2", {**SCRAM, "ssl.ca.location": "/ca", "consumer.session.timeout.ms": "6000"}
    )
    conf = settings.kafka_python()
    assert conf["bootstrap_servers"] == ["a:1", "b:2"]
    assert conf["security_protocol"] == "SASL_SSL" and conf["sasl_mechanism"] == "SCRAM-SHA-512"
    assert (conf["sasl_plain_username"], conf["sasl_plain_password"]) == ("u", "p")
    assert conf["session_timeout_ms"] == 6000
    assert conf["ssl_context"].ca_location == "/ca" and conf["ssl_context"].check_hostname


def test_kafka_python_gets_a_tls_context_with_the_client_certificate(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("app.example")
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    cert.cert_chain_pems[0].write_to_path(str(tmp_path / "user.crt"))
    cert.private_key_pem.write_to_path(str(tmp_path / "user.key"))
    settings = KafkaSettings.of(
        "k:9093",
        {
            "security.protocol": "ssl",
            "ssl.ca.location": str(tmp_path / "ca.crt"),
            "ssl.certificate.location": str(tmp_path / "user.crt"),
            "ssl.key.location": str(tmp_path / "user.key"),
        },
        clients=WORKER_CLIENTS,
    )
    ctx = kafka_python_config(settings)["ssl_context"]
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert len(ctx.get_ca_certs()) == 1
    # an inline CA (ssl.ca.pem) is the same context
    inline = KafkaSettings.of(
        "k:9093", {"security.protocol": "ssl", "ssl.ca.pem": ca.cert_pem.bytes().decode()}
    )
    assert len(kafka_python_config(inline)["ssl_context"].get_ca_certs()) == 1
    # hostname verification can be turned off as in librdkafka, and only then
    off = KafkaSettings.of(
        "k:9093", {"security.protocol": "ssl", "ssl.endpoint.identification.algorithm": "none"}
    )
    assert not kafka_python_config(off)["ssl_context"].check_hostname


def test_oauth_is_a_token_provider_for_kafka_python_and_a_callback_handler_for_java() -> None:
    settings = KafkaSettings.of("k:9093", OAUTH, clients=(*WORKER_CLIENTS, "java"))
    provider = kafka_python_config(settings)["sasl_oauth_token_provider"]
    assert isinstance(provider, ClientCredentialsTokenProvider)
    java = settings.java()
    assert java["sasl.mechanism"] == "OAUTHBEARER"
    assert java["sasl.login.callback.handler.class"] == JAVA_OAUTH_CALLBACK
    assert java["sasl.oauthbearer.token.endpoint.url"] == "https://idp.example/token"
    assert java["sasl.jaas.config"] == (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
        'clientId="app" clientSecret="s3cret" scope="kafka";'
    )


def test_java_gets_client_certificates_inline_and_a_pem_truststore() -> None:
    files = {"/u.crt": "CERT", "/u.key": "KEY"}
    settings = KafkaSettings.of(
        "k:9093",
        {
            "security.protocol": "SSL",
            "ssl.ca.location": "/ca.crt",
            "ssl.certificate.location": "/u.crt",
            "ssl.key.location": "/u.key",
        },
        clients=COMPACTOR_CLIENTS,
    )
    assert settings.java(files.__getitem__) == {
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.crt",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.certificate.chain": "CERT",
        "ssl.keystore.key": "KEY",
    }


@pytest.mark.parametrize(
    ("props", "clients", "named"),
    [
        (
            {"security.protocol": "SSL", "ssl.keystore.location": "/k.p12"},
            WORKER_CLIENTS,
            "ssl.keystore.location",
        ),
        (
            {"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"},
            COMPACTOR_CLIENTS,
            "Java",
        ),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, WORKER_CLIENTS, "Kerberos"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN"}, WORKER_CLIENTS, "sasl.password"),
        ({**OAUTH, "sasl.oauthbearer.method": "default"}, WORKER_CLIENTS, "sasl.oauthbearer.method"),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/c"}, WORKER_CLIENTS, "ssl.key.location"),
        ({"ssl.ca.location": "/ca"}, WORKER_CLIENTS, "does not use TLS"),
        ({"security.protocol": "TLS"}, WORKER_CLIENTS, "security.protocol"),
        (
            {"security.protocol": "SSL", "ssl.ca.locaton": "/ca"},
            WORKER_CLIENTS,
            "did you mean 'ssl.ca.location'",
        ),
        ({**SCRAM, "consumer.sasl.password": "x"}, WORKER_CLIENTS, "drop the prefix"),
        ({"security.protocol": "SSL", "ssl.engine.location": "/e"}, WORKER_CLIENTS, "kafka-python"),
    ],
)
def test_what_a_client_cannot_carry_is_refused_by_name(
    props: dict[str, str], clients: tuple[str, ...], named: str
) -> None:
    with pytest.raises(SettingRefused, match=named):
        KafkaSettings.of("k:9093", props, clients=clients)  # type: ignore[arg-type]


def test_a_properties_file_is_read_with_javas_rules(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# a comment\nsecurity.protocol=SASL_SSL\nsasl.mechanism : SCRAM-SHA-512\n"
        "sasl.password=with\\=equals\\\n  continued\n"
    )
    assert read_properties(path) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.password": "with=equalscontinued",
    }
    with pytest.raises(PropertiesFileError, match="cannot read Kafka config file"):
        read_properties(tmp_path / "missing.properties")


def test_later_layers_win_and_bootstrap_comes_from_its_own_option() -> None:
    settings = KafkaSettings.of(
        "k:9093", {"bootstrap.servers": "other:1", "client.id": "a"}, {"client.id": "b"}
    )
    assert settings.librdkafka("admin") == {"bootstrap.servers": "k:9093", "client.id": "b"}
