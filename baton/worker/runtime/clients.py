"""The settings of the worker's Kafka clients, derived from its config alone.

Every client reads the one set of settings (``--kafka-config-file``, ``-X``), checked at
start-up by :mod:`baton.clients.settings`: the data consumer, the producer, the admin
client, the group member (kafka-python, ``assignment/membership.py``), the restore and
standby consumers and the control-topic clients (``bluegreen.py``). ``consumer.``/
``producer.`` prefixes route a tuning setting to one of them, and consumer-only settings
never reach a producer (librdkafka warns about each one). Connection settings (TLS, SASL,
OAuth) reach every client.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from baton.clients.kafka_python import kafka_python_config
from baton.clients.settings import KafkaSettings
from baton.worker.config import ProcessingGuarantee, WorkerConfig

# librdkafka postpones a partition's next fetch by ``fetch.queue.backoff.ms`` (default 1 s)
# whenever its prefetch queue holds ``queued.min.messages`` (100,000): one queue's worth per
# backoff is then all a consumer can read, ~120,000 small records/s here whatever the app
# does (docs/benchmarks.md, "Measured design choices": fetch-backoff: a loop that decodes
# the clicks read 126k/s at 1 s, 207k/s at 0.6 s, 383k/s at 0.3 s, CPU-bound 630k/s at
# 0.1 s; bench/throughput.py's "librdkafka fetch" row shows the cap). Baton's one-process
# rate sat at it. 100 ms lifts it past what a Python process processes; a full queue then
# costs ten checks a second. The restore and standby consumers derive from these settings too.
FETCH_DEFAULTS: dict[str, Any] = {"fetch.queue.backoff.ms": 100}

# librdkafka's own log lines go through Python logging (JSON, with the app's fields) instead
# of raw "%3|..." lines on stderr; confluent-kafka hands each to this logger.
LIBRDKAFKA_LOG = logging.getLogger("baton.librdkafka")

HEARTBEAT_MS = 1000  # the group member's heartbeat (see ClientSettings.membership)


@dataclass(frozen=True)
class ClientSettings:
    """The clients of one worker process, named ``<application id>-<ident>`` so broker logs tell them apart."""

    config: WorkerConfig
    ident: str
    kafka: KafkaSettings = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "kafka", self.config.kafka_settings())

    @property
    def app(self) -> str:
        return self.config.application_id

    @property
    def eos(self) -> bool:
        return self.config.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE_V2

    @property
    def client_id(self) -> str:
        return f"{self.app}-{self.ident}"

    def base(self) -> dict[str, Any]:
        """An admin client's settings: the connection's, and the user's that an admin takes."""
        return {"client.id": self.client_id, "logger": LIBRDKAFKA_LOG, **self.kafka.librdkafka("admin")}

    def consumer(self) -> dict[str, Any]:
        """The data consumer's settings; the restore and standby consumer's derive from them.

        A worker that knows its zone fetches from a replica in that zone when the brokers
        allow it (``client.rack``, KIP-392's follower fetching: brokers with ``broker.rack`` and
        ``replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector``),
        so input and changelog reads stay in the zone; a ``client.rack`` in the user's
        settings wins.
        """
        rack = {"client.rack": self.config.zone} if self.config.zone else {}
        return {
            "client.id": self.client_id,
            "logger": LIBRDKAFKA_LOG,
            "group.id": self.app,  # committed offsets are read for it; it never joins (membership.py does)
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if self.eos else "read_uncommitted",
            **FETCH_DEFAULTS,
            **rack,
            **self.kafka.librdkafka("consumer"),
        }

    def producer(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "client.id": self.client_id,
            "logger": LIBRDKAFKA_LOG,
            "partitioner": "murmur2_random",  # the Java client's partitioner: co-partitioning with JVM apps
            "linger.ms": 5,
            "enable.idempotence": True,
        }
        if self.eos:
            conf["transactional.id"] = f"{self.app}-{self.ident}"
            # Kafka Streams' EOS default: a dead owner blocks 10 s at most
            conf["transaction.timeout.ms"] = 10000
        conf.update(self.kafka.librdkafka("producer"))
        return conf

    def membership(self) -> dict[str, Any]:
        """kafka-python's spelling of the same settings, for the group member.

        Heartbeats every second, not the clients' usual 3 s: members hear of a rebalance at
        their next heartbeat, and a member that joins a running group (a scale-out, a pod's
        second process, a restarted pod) gets its tasks only once every other member has
        heard. At 3 s, the second process of a pod ran idle for 3 s while the first one
        held all the tasks (bench/throughput.py --processes 2). A user's setting wins.
        """
        return {
            "client_id": self.client_id,
            "heartbeat_interval_ms": HEARTBEAT_MS,
            **kafka_python_config(self.kafka),
        }

    def shared(self) -> dict[str, Any]:
        """Settings for the control-topic clients beside the bootstrap (each reads and writes)."""
        return self.kafka.common()
