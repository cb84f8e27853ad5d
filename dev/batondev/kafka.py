"""Apache Kafka in KRaft mode (combined broker + controller) from Kafka's jars on Maven Central.

The jars are resolved by Maven from a tiny generated pom (``mvn dependency:copy-dependencies``)
into ``~/.cache/baton/kafka-<version>/libs``, with Log4j 2 as the logging backend so the
broker log is readable. The broker listens on 127.0.0.1 only: a PLAINTEXT listener for
tests and a SASL_PLAINTEXT listener with SCRAM-SHA-512 for the credential tests.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from . import maven, paths, ports, procs, versions
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


def _java_cmd(main_class: str, *args: str) -> list[str]:
    return [
        need("java"),
        "-Xms256m",
        "-Xmx1g",
        "-XX:+UseG1GC",
        "-Djava.awt.headless=true",
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


def _server_properties(data: Path) -> str:
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{ports.KAFKA_CONTROLLER}",
            f"listeners=PLAINTEXT://127.0.0.1:{ports.KAFKA},CONTROLLER://127.0.0.1:{ports.KAFKA_CONTROLLER},"
            f"SCRAM://127.0.0.1:{ports.KAFKA_SCRAM}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{ports.KAFKA},SCRAM://127.0.0.1:{ports.KAFKA_SCRAM}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT,SCRAM:SASL_PLAINTEXT",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "sasl.enabled.mechanisms=SCRAM-SHA-512",
            "listener.name.scram.scram-sha-512.sasl.jaas.config="
            "org.apache.kafka.common.security.scram.ScramLoginModule required;",
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
    procs.ensure_ports_free(NAME, [ports.KAFKA, ports.KAFKA_CONTROLLER, ports.KAFKA_SCRAM])
    run_dir = paths.RUN / NAME
    data = run_dir / "data"
    if fresh:
        shutil.rmtree(data, ignore_errors=True)
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
                "--add-scram",
                f"SCRAM-SHA-512=[name={SCRAM_USER},password={SCRAM_PASSWORD}]",
            )
        )
    env = dict(os.environ)
    procs.start(NAME, _java_cmd("kafka.Kafka", str(props)), env=env)
    procs.wait_started(NAME, _ready_fast, timeout)


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
    return procs.stop(NAME, timeout=30)
