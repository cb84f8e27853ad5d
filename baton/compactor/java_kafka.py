"""librdkafka client settings translated for the Java Kafka client that Spark's Kafka source runs.

The compactor takes the same settings as the workers (``BATON_KAFKA_CONFIG``, librdkafka
names) and uses them as they are for its own confluent-kafka clients. Spark's Kafka source
is the Java client, which knows the common names (``security.protocol``,
``sasl.mechanism``, ``client.id``, ...) but not librdkafka's credential and certificate
settings, and ignores unknown ones with only a warning, so a SASL job would fail to
authenticate with nothing in its log saying why. This module maps what differs and refuses
what it cannot map, so the error names the setting.
"""

from __future__ import annotations

_LOGIN_MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}
# Consumed by the translation below, never passed through under their librdkafka names.
_TRANSLATED = {"sasl.mechanisms", "sasl.mechanism", "sasl.username", "sasl.password", "ssl.ca.location"}
# librdkafka-only settings with no Java counterpart the job needs: dropped.
_LIBRDKAFKA_ONLY = {"enable.ssl.certificate.verification", "ssl.endpoint.identification.algorithm"}
# Client certificates (mTLS) need a keystore; not supported yet: refused with their name.
_UNSUPPORTED = {"ssl.certificate.location", "ssl.key.location", "ssl.key.password", "ssl.keystore.location"}


def _jaas_quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def java_client_config(settings: dict[str, str]) -> dict[str, str]:
    """The Java client's settings (without Spark's ``kafka.`` prefix) for librdkafka ``settings``."""
    unsupported = sorted(k for k in settings if k in _UNSUPPORTED)
    if unsupported:
        raise ValueError(
            f"Kafka settings {', '.join(unsupported)} (client certificates) cannot be passed to Spark's "
            "Kafka source yet: the compactor supports SASL and server-verified TLS only"
        )
    out = {k: v for k, v in settings.items() if k not in _TRANSLATED | _LIBRDKAFKA_ONLY}
    if "security.protocol" in settings:
        out["security.protocol"] = settings["security.protocol"].upper()
    mechanism = (settings.get("sasl.mechanism") or settings.get("sasl.mechanisms") or "").upper()
    if mechanism:
        out["sasl.mechanism"] = mechanism
    if "sasl.username" in settings or "sasl.password" in settings:
        module = _LOGIN_MODULES.get(mechanism or "GSSAPI")
        if module is None:
            raise ValueError(
                f"sasl.mechanism {mechanism or '(unset: GSSAPI)'} with sasl.username/password: the compactor "
                f"passes credentials to Spark only for {', '.join(sorted(_LOGIN_MODULES))}"
            )
        out["sasl.jaas.config"] = (
            f"{module} required username={_jaas_quote(settings.get('sasl.username', ''))} "
            f"password={_jaas_quote(settings.get('sasl.password', ''))};"
        )
    if "ssl.ca.location" in settings:
        out["ssl.truststore.type"] = "PEM"
        out["ssl.truststore.location"] = settings["ssl.ca.location"]
    if settings.get("enable.ssl.certificate.verification", "true").lower() == "false":
        out["ssl.endpoint.identification.algorithm"] = ""
    return out


def spark_kafka_options(settings: dict[str, str]) -> dict[str, str]:
    """Options of Spark's Kafka source: the Java client's settings prefixed ``kafka.``."""
    return {f"kafka.{k}": v for k, v in java_client_config(settings).items()}
