"""How an app's Pods reach Kafka: librdkafka settings, Secret-backed env vars and mounts (pure).

Two shapes of ``spec.kafka`` lead here. Strimzi's (``tls.trustedCertificates``,
``authentication`` of type tls / scram-sha-* / plain / oauth, Secrets by reference) is the one
platform teams know; the older one (``securityProtocol``, ``saslMechanism``, ``secretRef``)
still works. Either way, Secrets never enter a ConfigMap or the StreamApp:

* certificates and keys are mounted read-only as files (``ssl.*.location`` point at them);
* passwords and client secrets become env vars from ``secretKeyRef`` and are referenced as
  ``$(VAR)`` in ``BATON_KAFKA_CONFIG``, which the kubelet expands (the vars come first).

The worker StatefulSets and the compactor's CronJob/SparkApplication get the same result, so
the Job connects as the app does. The operator's own clients read the same Secrets
(:func:`operator_settings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from baton.operator.core.constants import KAFKA_SECRET_DIR
from baton.operator.core.spec import KafkaSpec

SASL_USERNAME_VAR = "KAFKA_SASL_USERNAME"
SASL_PASSWORD_VAR = "KAFKA_SASL_PASSWORD"
OAUTH_CLIENT_SECRET_VAR = "KAFKA_OAUTH_CLIENT_SECRET"
CA_DIR = f"{KAFKA_SECRET_DIR}/ca"
USER_DIR = f"{KAFKA_SECRET_DIR}/user"


@dataclass(frozen=True)
class KafkaAccess:
    """What a Pod needs to connect: settings (with $(VAR)s), env vars, volumes, mounts."""

    config: dict[str, str]
    env: list[dict[str, Any]] = field(default_factory=list)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    mounts: list[dict[str, Any]] = field(default_factory=list)


def _secret_env(var: str, secret: str, key: str) -> dict[str, Any]:
    return {"name": var, "valueFrom": {"secretKeyRef": {"name": secret, "key": key}}}


def _secret_volume(
    name: str, secret: str, items: list[tuple[str, str]], path: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    volume = {
        "name": name,
        "secret": {
            "secretName": secret,
            "defaultMode": 0o440,
            "items": [{"key": key, "path": file} for key, file in items],
        },
    }
    return volume, {"name": name, "mountPath": path, "readOnly": True}


def pod_access(kafka: KafkaSpec) -> KafkaAccess:
    """The Pods' view of ``spec.kafka``."""
    if not kafka.strimzi_shaped:
        return _legacy(kafka)
    config = {"security.protocol": kafka.protocol.lower()}
    env: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if kafka.tls is not None and kafka.tls.trusted_certificates:
        trusted = kafka.tls.trusted_certificates[0]
        volume, mount = _secret_volume(
            "kafka-ca", trusted.secret_name, [(trusted.certificate, "ca.crt")], CA_DIR
        )
        volumes.append(volume)
        mounts.append(mount)
        config["ssl.ca.location"] = f"{CA_DIR}/ca.crt"
    auth = kafka.authentication
    if auth is None:
        return KafkaAccess(config, env, volumes, mounts)
    if auth.type == "tls":
        assert auth.certificate_and_key is not None  # the CRD requires it
        ck = auth.certificate_and_key
        volume, mount = _secret_volume(
            "kafka-user", ck.secret_name, [(ck.certificate, "user.crt"), (ck.key, "user.key")], USER_DIR
        )
        volumes.append(volume)
        mounts.append(mount)
        config["ssl.certificate.location"] = f"{USER_DIR}/user.crt"
        config["ssl.key.location"] = f"{USER_DIR}/user.key"
    elif auth.type == "oauth":
        assert auth.client_secret is not None and auth.client_id and auth.token_endpoint_uri
        env.append(
            _secret_env(OAUTH_CLIENT_SECRET_VAR, auth.client_secret.secret_name, auth.client_secret.key)
        )
        config["sasl.mechanism"] = "OAUTHBEARER"
        config["sasl.oauthbearer.method"] = "oidc"
        config["sasl.oauthbearer.token.endpoint.url"] = auth.token_endpoint_uri
        config["sasl.oauthbearer.client.id"] = auth.client_id
        config["sasl.oauthbearer.client.secret"] = f"$({OAUTH_CLIENT_SECRET_VAR})"
        if auth.scope:
            config["sasl.oauthbearer.scope"] = auth.scope
    else:
        assert auth.password_secret is not None and auth.username is not None
        env.append(
            _secret_env(SASL_PASSWORD_VAR, auth.password_secret.secret_name, auth.password_secret.password)
        )
        config["sasl.mechanism"] = auth.sasl_mechanism or ""
        config["sasl.username"] = auth.username
        config["sasl.password"] = f"$({SASL_PASSWORD_VAR})"
    return KafkaAccess(config, env, volumes, mounts)


def _legacy(kafka: KafkaSpec) -> KafkaAccess:
    """securityProtocol + saslMechanism + secretRef (keys username, password, ca.crt)."""
    config = {"security.protocol": kafka.security_protocol.lower()}
    env: list[dict[str, Any]] = []
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    secret = kafka.secret_ref
    if kafka.uses_sasl:
        config["sasl.mechanism"] = kafka.sasl_mechanism
        config["sasl.username"] = f"$({SASL_USERNAME_VAR})"
        config["sasl.password"] = f"$({SASL_PASSWORD_VAR})"
        if secret is not None:
            env = [
                _secret_env(var, secret.name, key)
                for var, key in ((SASL_USERNAME_VAR, "username"), (SASL_PASSWORD_VAR, "password"))
            ]
    if kafka.uses_tls and secret is not None:
        config["ssl.ca.location"] = f"{KAFKA_SECRET_DIR}/ca.crt"
        volumes.append({"name": "kafka-secret", "secret": {"secretName": secret.name, "defaultMode": 0o440}})
        mounts.append({"name": "kafka-secret", "mountPath": KAFKA_SECRET_DIR, "readOnly": True})
    return KafkaAccess(config, env, volumes, mounts)


def secrets_read(kafka: KafkaSpec) -> list[str]:
    """The Secrets the operator's own clients read (its RBAC must allow get on them)."""
    if not kafka.strimzi_shaped:
        return (
            [kafka.secret_ref.name] if kafka.secret_ref is not None and kafka.protocol != "PLAINTEXT" else []
        )
    names = [t.secret_name for t in (kafka.tls.trusted_certificates if kafka.tls else [])]
    auth = kafka.authentication
    if auth is not None:
        for ref in (auth.certificate_and_key, auth.password_secret, auth.client_secret):
            if ref is not None:
                names.append(ref.secret_name)
    return sorted(set(names))


class MissingSecret(LookupError):
    """A Secret (or one of its keys) the operator needs to connect as the app."""


def operator_settings(
    kafka: KafkaSpec,
    secrets: Mapping[str, Mapping[str, str]],
    write_file: Callable[[str, str], str],
) -> dict[str, str]:
    """The operator's librdkafka settings for the app's cluster, from the Secrets' data.

    ``write_file(name, content)`` stores PEM material where both of the operator's client
    libraries read files from, and returns its path (certificates and keys never travel
    inline to kafka-python). Raises :class:`MissingSecret` naming what is missing.
    """

    def value(secret: str, key: str) -> str:
        data = secrets.get(secret)
        if data is None:
            raise MissingSecret(f"Secret {secret} is missing or not readable by the operator")
        if key not in data:
            raise MissingSecret(f"Secret {secret} has no key {key!r}")
        return data[key]

    if not kafka.strimzi_shaped:
        config = {"security.protocol": kafka.security_protocol.lower()}
        secret = kafka.secret_ref
        if kafka.uses_sasl:
            config["sasl.mechanism"] = kafka.sasl_mechanism
            if secret is not None:
                config["sasl.username"] = value(secret.name, "username")
                config["sasl.password"] = value(secret.name, "password")
        if kafka.uses_tls and secret is not None and "ca.crt" in secrets.get(secret.name, {}):
            config["ssl.ca.location"] = write_file("ca.crt", value(secret.name, "ca.crt"))
        return config
    pods = pod_access(kafka).config
    config = {k: v for k, v in pods.items() if not v.startswith(("$(", KAFKA_SECRET_DIR))}
    if kafka.tls is not None and kafka.tls.trusted_certificates:
        trusted = kafka.tls.trusted_certificates[0]
        config["ssl.ca.location"] = write_file("ca.crt", value(trusted.secret_name, trusted.certificate))
    auth = kafka.authentication
    if auth is not None and auth.certificate_and_key is not None:
        ck = auth.certificate_and_key
        config["ssl.certificate.location"] = write_file("user.crt", value(ck.secret_name, ck.certificate))
        config["ssl.key.location"] = write_file("user.key", value(ck.secret_name, ck.key))
    if auth is not None and auth.password_secret is not None:
        config["sasl.password"] = value(auth.password_secret.secret_name, auth.password_secret.password)
    if auth is not None and auth.client_secret is not None:
        config["sasl.oauthbearer.client.secret"] = value(
            auth.client_secret.secret_name, auth.client_secret.key
        )
    return config
