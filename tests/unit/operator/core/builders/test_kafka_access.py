"""spec.kafka in Strimzi's shape -> what the Pods and the operator's own clients get (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson
import pytest

from baton.clients.settings import WORKER_CLIENTS, KafkaSettings
from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.kafka_access import (
    OAUTH_CLIENT_SECRET_VAR,
    SASL_PASSWORD_VAR,
    MissingSecret,
    operator_settings,
    pod_access,
    secrets_read,
)
from baton.operator.core.spec import KafkaSpec
from tests.support.samples import app

pytestmark = pytest.mark.unit

MTLS: dict[str, Any] = {
    "bootstrapServers": "my-cluster-kafka-bootstrap:9093",
    "tls": {"trustedCertificates": [{"secretName": "my-cluster-cluster-ca-cert"}]},
    "authentication": {"type": "tls", "certificateAndKey": {"secretName": "clicks-user"}},
}
SCRAM: dict[str, Any] = {
    "bootstrapServers": "k:9094",
    "tls": {},
    "authentication": {
        "type": "scram-sha-512",
        "username": "clicks",
        "passwordSecret": {"secretName": "clicks-pw"},
    },
}
OAUTH: dict[str, Any] = {
    "bootstrapServers": "k:9095",
    "tls": {"trustedCertificates": [{"secretName": "ca", "certificate": "tls.crt"}]},
    "authentication": {
        "type": "oauth",
        "tokenEndpointUri": "https://idp/realms/r/protocol/openid-connect/token",
        "clientId": "clicks",
        "clientSecret": {"secretName": "clicks-oauth", "key": "secret"},
        "scope": "kafka",
    },
}


def _kafka(body: Mapping[str, Any]) -> KafkaSpec:
    return KafkaSpec.model_validate(body)


def test_mutual_tls_mounts_the_ca_and_the_users_secret_as_files() -> None:
    access = pod_access(_kafka(MTLS))
    assert access.config == {
        "security.protocol": "ssl",
        "ssl.ca.location": "/etc/baton/kafka/ca/ca.crt",
        "ssl.certificate.location": "/etc/baton/kafka/user/user.crt",
        "ssl.key.location": "/etc/baton/kafka/user/user.key",
    }
    assert access.env == []
    secrets = {v["secret"]["secretName"]: v["secret"]["items"] for v in access.volumes}
    assert secrets == {
        "my-cluster-cluster-ca-cert": [{"key": "ca.crt", "path": "ca.crt"}],
        "clicks-user": [{"key": "user.crt", "path": "user.crt"}, {"key": "user.key", "path": "user.key"}],
    }
    assert all(m["readOnly"] for m in access.mounts)
    # and every client library can carry it (the worker checks the same at start-up)
    KafkaSettings.of("k:9093", access.config, clients=WORKER_CLIENTS)


def test_passwords_and_client_secrets_are_env_references_never_values() -> None:
    scram = pod_access(_kafka(SCRAM))
    assert scram.config["security.protocol"] == "sasl_ssl" and "ssl.ca.location" not in scram.config
    assert scram.config["sasl.password"] == f"$({SASL_PASSWORD_VAR})"
    assert scram.env == [
        {"name": SASL_PASSWORD_VAR, "valueFrom": {"secretKeyRef": {"name": "clicks-pw", "key": "password"}}}
    ]
    oauth = pod_access(_kafka(OAUTH))
    assert oauth.config["sasl.oauthbearer.client.secret"] == f"$({OAUTH_CLIENT_SECRET_VAR})"
    assert (
        oauth.config["sasl.oauthbearer.method"] == "oidc" and oauth.config["sasl.mechanism"] == "OAUTHBEARER"
    )
    assert oauth.volumes[0]["secret"]["items"] == [{"key": "tls.crt", "path": "ca.crt"}]
    KafkaSettings.of("k:9095", oauth.config, clients=WORKER_CLIENTS)


def test_workers_and_the_compactor_get_the_same_access() -> None:
    sample = app(kafka=MTLS, compaction={"enabled": True, "snapshotStore": "s3a://b/s"})
    objects = {f"{o['kind']}/{o['metadata']['name']}": o for o in desired_objects(sample)}
    worker = objects["StatefulSet/click-counter-blue"]["spec"]["template"]["spec"]
    job = objects["CronJob/click-counter-compactor"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    for pod in (worker, job):
        env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
        config = orjson.loads(env["BATON_KAFKA_CONFIG"] or "{}")
        assert config["ssl.certificate.location"] == "/etc/baton/kafka/user/user.crt"
        mounted = {m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
        assert {"/etc/baton/kafka/ca", "/etc/baton/kafka/user"} <= mounted
    # no Secret data in anything the operator writes
    assert "BEGIN" not in orjson.dumps(list(objects.values())).decode()


def test_the_operator_reads_the_same_secrets_into_files_of_its_own() -> None:
    kafka = _kafka(MTLS)
    assert secrets_read(kafka) == ["clicks-user", "my-cluster-cluster-ca-cert"]
    written: dict[str, str] = {}

    def write(name: str, content: str) -> str:
        written[name] = content
        return f"/private/{name}"

    data = {
        "my-cluster-cluster-ca-cert": {"ca.crt": "CA"},
        "clicks-user": {"user.crt": "CERT", "user.key": "KEY"},
    }
    assert operator_settings(kafka, data, write) == {
        "security.protocol": "ssl",
        "ssl.ca.location": "/private/ca.crt",
        "ssl.certificate.location": "/private/user.crt",
        "ssl.key.location": "/private/user.key",
    }
    assert written == {"ca.crt": "CA", "user.crt": "CERT", "user.key": "KEY"}
    with pytest.raises(MissingSecret, match=r"Secret clicks-user has no key 'user\.key'"):
        operator_settings(kafka, {**data, "clicks-user": {"user.crt": "CERT"}}, write)
    scram = operator_settings(_kafka(SCRAM), {"clicks-pw": {"password": "pw"}}, write)
    assert scram["sasl.password"] == "pw" and scram["sasl.username"] == "clicks"
