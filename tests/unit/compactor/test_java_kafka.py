"""librdkafka settings -> the Java client's, for Spark's Kafka source; and the CronJob gets them."""

from __future__ import annotations

import orjson
import pytest

from baton.compactor.java_kafka import java_client_config, spark_kafka_options
from baton.operator.core.builders import desired_objects
from tests.support.samples import app

pytestmark = pytest.mark.unit


def test_scram_credentials_become_a_jaas_config() -> None:
    java = java_client_config(
        {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "baton",
            "sasl.password": 'p"w\\d',
            "ssl.ca.location": "/etc/baton/kafka/ca.crt",
            "client.id": "c",
        }
    )
    assert java == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="baton" '
        'password="p\\"w\\\\d";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/etc/baton/kafka/ca.crt",
        "client.id": "c",
    }
    assert spark_kafka_options(
        {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanisms": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
        }
    ) == {
        "kafka.security.protocol": "SASL_PLAINTEXT",
        "kafka.sasl.mechanism": "PLAIN",
        "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
        'password="p";',
    }


def test_what_cannot_be_passed_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"ssl\.keystore\.location.*PEM files"):
        java_client_config({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12"})
    with pytest.raises(ValueError, match="GSSAPI"):
        java_client_config({"security.protocol": "SASL_SSL", "sasl.username": "u", "sasl.password": "p"})
    with pytest.raises(ValueError, match="always verifies"):
        java_client_config({"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"})
    # librdkafka tuning has Java names of its own: not passed under librdkafka's
    assert java_client_config({"fetch.wait.max.ms": "5"}) == {"security.protocol": "PLAINTEXT"}


def test_the_cronjob_connects_as_the_workers_do() -> None:
    """SASL credentials from the Secret, BATON_KAFKA_CONFIG, and the CA certificate volume."""
    sample = app(
        kafka={
            "bootstrapServers": "k:9093",
            "securityProtocol": "SASL_SSL",
            "saslMechanism": "SCRAM-SHA-256",
            "secretRef": {"name": "kafka-creds"},
        },
        compaction={"enabled": True, "snapshotStore": "s3a://b/s"},
    )
    objects = {f"{o['kind']}/{o['metadata']['name']}": o for o in desired_objects(sample)}
    worker = objects["StatefulSet/click-counter-blue"]["spec"]["template"]["spec"]
    job = objects["CronJob/click-counter-compactor"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = job["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["KAFKA_SASL_PASSWORD"]["valueFrom"] == {
        "secretKeyRef": {"name": "kafka-creds", "key": "password"}
    }
    config = orjson.loads(env["BATON_KAFKA_CONFIG"]["value"])
    assert config["sasl.password"] == "$(KAFKA_SASL_PASSWORD)" and config["ssl.ca.location"].endswith(
        "ca.crt"
    )
    worker_env = {e["name"]: e.get("value") for e in worker["containers"][0]["env"]}
    assert env["BATON_KAFKA_CONFIG"]["value"] == worker_env["BATON_KAFKA_CONFIG"]
    names = [e["name"] for e in container["env"]]
    assert names.index("KAFKA_SASL_PASSWORD") < names.index(
        "BATON_KAFKA_CONFIG"
    )  # $(VAR) expands earlier ones
    assert [v for v in job["volumes"] if v["name"] == "kafka-secret"] == [
        v for v in worker["volumes"] if v["name"] == "kafka-secret"
    ]
    assert any(m["name"] == "kafka-secret" for m in container["volumeMounts"])
