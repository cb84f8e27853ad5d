"""Apache Kafka in KRaft mode (combined broker + controller) from Kafka's jars on Maven Central.

The jars are resolved by Maven from a tiny generated pom (``mvn dependency:copy-dependencies``)
into ``~/.cache/baton/kafka-<version>/libs``, with Log4j 2 as the logging backend so the
broker log is readable. The broker listens on 127.0.0.1, and on the node's address for
Pods (``NODE`` listeners, advertised there), and enforces what each listener claims:

| listener | port | security |
|---|---|---|
| PLAINTEXT | ``ports.KAFKA`` | none: the principal is ANONYMOUS, a super user (most tests) |
| SCRAM | ``ports.KAFKA_SCRAM`` | SASL_PLAINTEXT, SCRAM-SHA-512 |
| MTLS | ``ports.KAFKA_MTLS`` | SSL with client certificates required; principal = the certificate's CN |
| SASL_SSL | ``ports.KAFKA_SASL_SSL`` | SASL_SSL, SCRAM-SHA-512 |
| OAUTH | ``ports.KAFKA_OAUTH`` | SASL_SSL, OAUTHBEARER: JWTs from the stack's Keycloak (``oidc.py``), principal = ``azp`` |
| NODE | ``ports.KAFKA_NODE`` on the node's address | as PLAINTEXT |
| NODE_MTLS | ``ports.KAFKA_NODE_MTLS`` on the node's address | as MTLS |

Certificates come from the stack's CA (``tls.py``). ``StandardAuthorizer`` with
``allow.everyone.if.no.acl.found=false``: every principal but ANONYMOUS needs ACLs. The stack
grants everything to its own principals (``baton`` over SCRAM, ``baton-client`` by
certificate, ``clicks-oauth`` by token); tests make principals of their own and grant them
exactly what they test.

``BATON_KAFKA_PLAIN=1`` starts a bare broker instead: the PLAINTEXT listener only, no TLS,
SASL, ACLs or Keycloak. A test that needs a second, brand-new broker beside the stack's
(``BATON_RUN_DIR``, ``BATON_PORT_BASE``) and none of its security starts that way, without
Keycloak's JVM (~20 s of two cores on a quiet machine).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from . import maven, oidc, paths, ports, procs, tls, versions
from .requirements import need, run

NAME = "kafka"
LOG4J = "2.25.2"
SLF4J = "2.0.17"  # log4j-slf4j2-impl needs SLF4J 2; without the pin Maven picks a 1.7 and logs go nowhere
SCRAM_USER = "baton"
SCRAM_PASSWORD = "baton-secret"  # a local test credential, not a secret

POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.baton</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_{scala}</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>{slf4j}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>{log4j}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>{log4j}</version></dependency>
  </dependencies>
</project>
"""

LOG4J2 = """status = warn
appender.file.type = Console
appender.file.name = STDOUT
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = STDOUT
logger.kafka.name = kafka
logger.kafka.level = INFO
logger.request.name = kafka.request.logger
logger.request.level = WARN
logger.cleaner.name = kafka.log.LogCleaner
logger.cleaner.level = INFO
logger.state.name = state.change.logger
logger.state.level = WARN
logger.zk.name = org.apache.kafka.clients
logger.zk.level = WARN
"""


def home() -> Path:
    return paths.tool_dir("kafka", f"{versions.SCALA}-{versions.KAFKA}")


def install() -> Path:
    """Resolve the broker's jars once per version; returns the libs folder."""
    libs = home() / "libs"
    if (home() / ".complete").exists():
        return libs
    shutil.rmtree(home(), ignore_errors=True)
    pom = POM.format(scala=versions.SCALA, kafka=versions.KAFKA, log4j=LOG4J, slf4j=SLF4J)
    maven.copy_dependencies(pom, libs, f"kafka-{versions.KAFKA}.install.log")
    (home() / "log4j2.properties").write_text(LOG4J2)
    (home() / ".complete").touch()
    return libs


def _java_cmd(main_class: str, *args: str, props: tuple[str, ...] = ()) -> list[str]:
    return [
        need("java"),
        "-Xms256m",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
        *props,
        f"-Dlog4j2.configurationFile={home() / 'log4j2.properties'}",
        "-cp",
        str(home() / "libs" / "*"),
        main_class,
        *args,
    ]


def bootstrap() -> str:
    return f"127.0.0.1:{ports.KAFKA}"


def scram_bootstrap() -> str:
    return f"127.0.0.1:{ports.KAFKA_SCRAM}"


def mtls_bootstrap() -> str:
    return f"127.0.0.1:{ports.KAFKA_MTLS}"


def sasl_ssl_bootstrap() -> str:
    return f"127.0.0.1:{ports.KAFKA_SASL_SSL}"


def oauth_bootstrap() -> str:
    return f"127.0.0.1:{ports.KAFKA_OAUTH}"


# The principals the stack grants everything (tests of ACLs make their own).
STACK_PRINCIPALS = (f"User:{SCRAM_USER}", f"User:{tls.STACK_CLIENT}", f"User:{oidc.STACK_CLIENT}")


def _plain() -> bool:
    return os.environ.get("BATON_KAFKA_PLAIN") == "1"


def _listeners() -> dict[str, tuple[int, str]]:
    if _plain():
        return {"PLAINTEXT": (ports.KAFKA, "PLAINTEXT")}
    return {
        "PLAINTEXT": (ports.KAFKA, "PLAINTEXT"),
        "SCRAM": (ports.KAFKA_SCRAM, "SASL_PLAINTEXT"),
        "MTLS": (ports.KAFKA_MTLS, "SSL"),
        "SASL_SSL": (ports.KAFKA_SASL_SSL, "SASL_SSL"),
        "OAUTH": (ports.KAFKA_OAUTH, "SASL_SSL"),
        # on the node's address, for Pods (batondev.node): plaintext and mutual TLS
        "NODE": (ports.KAFKA_NODE, "PLAINTEXT"),
        "NODE_MTLS": (ports.KAFKA_NODE_MTLS, "SSL"),
    }


def _host(listener: str) -> str:
    return ports.node_ip() if listener.startswith("NODE") else "127.0.0.1"


def node_bootstrap() -> str:
    """The broker as Pods on the node reach it."""
    return f"{ports.node_ip()}:{ports.KAFKA_NODE}"


def node_mtls_bootstrap() -> str:
    """The mutual-TLS listener as Pods on the node reach it."""
    return f"{ports.node_ip()}:{ports.KAFKA_NODE_MTLS}"


def _security_properties() -> list[str]:
    if _plain():
        return []
    scram_jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    oauth_jaas = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
    return [
        # TLS: one keystore and truststore for the three TLS listeners
        "ssl.keystore.type=PEM",
        f"ssl.keystore.location={tls.broker_pem()}",
        "ssl.truststore.type=PEM",
        f"ssl.truststore.location={tls.ca_file()}",
        "listener.name.mtls.ssl.client.auth=required",
        "listener.name.node_mtls.ssl.client.auth=required",
        # "CN=app,OU=...,O=..." -> "app", as Strimzi maps a KafkaUser's certificate
        "ssl.principal.mapping.rules=RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
        # SASL: SCRAM on two listeners, OAUTHBEARER on one
        "sasl.enabled.mechanisms=SCRAM-SHA-512",
        "listener.name.scram.sasl.enabled.mechanisms=SCRAM-SHA-512",
        f"listener.name.scram.scram-sha-512.sasl.jaas.config={scram_jaas}",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms=SCRAM-SHA-512",
        f"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config={scram_jaas}",
        "listener.name.oauth.sasl.enabled.mechanisms=OAUTHBEARER",
        f"listener.name.oauth.oauthbearer.sasl.jaas.config={oauth_jaas}",
        "listener.name.oauth.oauthbearer.sasl.server.callback.handler.class="
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
        f"sasl.oauthbearer.jwks.endpoint.url={oidc.jwks_endpoint()}",
        f"sasl.oauthbearer.expected.issuer={oidc.issuer()}",
        f"sasl.oauthbearer.expected.audience={oidc.AUDIENCE}",
        "sasl.oauthbearer.sub.claim.name=azp",
        # ACLs, deny by default; ANONYMOUS (PLAINTEXT and the controller) is a super user
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "allow.everyone.if.no.acl.found=false",
        "super.users=User:ANONYMOUS",
    ]


def _server_properties(data: Path) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{ports.KAFKA_CONTROLLER}",
            "listeners="
            + ",".join(
                [f"CONTROLLER://127.0.0.1:{ports.KAFKA_CONTROLLER}"]
                + [f"{name}://{_host(name)}:{port}" for name, (port, _) in _listeners().items()]
            ),
            "advertised.listeners="
            + ",".join(f"{name}://{_host(name)}:{port}" for name, (port, _) in _listeners().items()),
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,"
            + ",".join(f"{name}:{protocol}" for name, (_, protocol) in _listeners().items()),
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            *_security_properties(),
            f"log.dirs={data}",
            "num.partitions=1",
            "auto.create.topics.enable=false",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=8",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=8",
            "group.initial.rebalance.delay.ms=0",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "log.cleaner.backoff.ms=1000",
            "delete.topic.enable=true",
            "",
        ]
    )


def _ready_fast() -> bool:
    # a metadata round trip with librdkafka is far cheaper than a JVM tool per poll
    from confluent_kafka.admin import AdminClient

    if not procs.port_open(ports.KAFKA):
        return False
    admin = AdminClient({"bootstrap.servers": bootstrap(), "socket.timeout.ms": 2000, "log_level": 0})
    md = admin.list_topics(timeout=2)
    return bool(md.brokers) and md.controller_id >= 0


def up(timeout: float = 120, *, fresh: bool = False) -> None:
    """Start the broker unless it already runs; format storage on first start.

    ``fresh`` starts a stopped broker with empty storage. Tests and the demo want that: their
    topics are throwaway, and a broker that was killed (a session ending, a CI job) must first
    recover every partition it ever had, which grows with each run (77 s for 1.9 GB here)
    until start-up outlasts ``timeout``. A running broker is never touched.
    """
    if procs.running_pid(NAME) is not None:
        procs.wait_started(NAME, _ready_fast, timeout)
        return
    install()
    procs.ensure_ports_free(NAME, [ports.KAFKA_CONTROLLER, *(port for port, _ in _listeners().values())])
    run_dir = paths.RUN / NAME
    data = run_dir / "data"
    if fresh:
        shutil.rmtree(data, ignore_errors=True)
    plain = _plain()
    if not plain:
        tls.ensure(fresh=fresh or not (data / "meta.properties").exists())
        oidc.up()  # the OAUTH listener validates tokens against its keys
    run_dir.mkdir(parents=True, exist_ok=True)
    props = run_dir / "server.properties"
    props.write_text(_server_properties(data))
    if not (data / "meta.properties").exists():
        shutil.rmtree(data, ignore_errors=True)
        cluster_id = _cluster_id()
        run(
            _java_cmd(
                "kafka.tools.StorageTool",
                "format",
                "-t",
                cluster_id,
                "-c",
                str(props),
                "--standalone",
                *(
                    []
                    if plain
                    else ["--add-scram", f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]"]
                ),
            )
        )
    env = dict(os.environ)
    # Kafka fetches only allow-listed OAuth URLs (CVE-2025-27817)
    allowed = () if plain else (f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={oidc.jwks_endpoint()}",)
    procs.start(NAME, _java_cmd("kafka.Kafka", str(props), props=allowed), env=env)
    procs.wait_started(NAME, _ready_fast, timeout)
    if not plain:
        _grant_stack_principals()


def _grant_stack_principals() -> None:
    """SCRAM credentials for ``baton`` and every right for the stack's own principals (idempotent)."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBinding,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
        ScramCredentialInfo,
        ScramMechanism,
        UserScramCredentialUpsertion,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap(), "log_level": 0})
    upsert = UserScramCredentialUpsertion(
        SCRAM_USER, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), SCRAM_PASSWORD.encode()
    )
    for fut in admin.alter_user_scram_credentials([upsert]).values():
        fut.result(30)
    resources = [
        (ResourceType.TOPIC, "*"),
        (ResourceType.GROUP, "*"),
        (ResourceType.TRANSACTIONAL_ID, "*"),
        (ResourceType.BROKER, "kafka-cluster"),  # librdkafka names the cluster resource BROKER,
    ]
    bindings = [
        AclBinding(
            kind, name, ResourcePatternType.LITERAL, principal, "*", AclOperation.ALL, AclPermissionType.ALLOW
        )
        for principal in STACK_PRINCIPALS
        for kind, name in resources
    ]
    for fut in admin.create_acls(bindings).values():
        fut.result(30)


def _cluster_id() -> str:
    # KRaft wants a base64 UUID; Kafka's own tool prints one, but uuid4 in that encoding is the same thing.
    # Like Kafka's Uuid.randomUuid, never one starting with "-": StorageTool's argument parser reads
    # "-t -abc..." as a missing value (1 in 64 fresh stacks failed to format).
    import base64

    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def down() -> bool:
    stopped = procs.stop(NAME, timeout=30)
    return oidc.down() or stopped
