"""The settings of the worker's Kafka clients, derived from its config alone.

Four clients read the same ``--kafka key=value`` settings: the data consumer, the producer,
the group member (kafka-python, ``assignment/membership.py``) and the control-topic follower
(``bluegreen.py``). ``consumer.``/``producer.`` prefixes route a setting to one of them, and
consumer-only settings never reach a producer (librdkafka warns about each one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from baton.worker.assignment.membership import kafka_python_config
from baton.worker.config import ProcessingGuarantee, WorkerConfig

# librdkafka postpones a partition's next fetch by ``fetch.queue.backoff.ms`` (default 1 s)
# whenever its prefetch queue holds ``queued.min.messages`` (100,000): one queue's worth per
# backoff is then all a consumer can read, ~120,000 small records/s here whatever the app
# does (docs/benchmarks.md: a loop that decodes the clicks read 126k/s at 1 s, 207k/s at
# 0.6 s, 383k/s at 0.3 s, CPU-bound 630k/s at 0.1 s; bench/throughput.py's "librdkafka
# fetch" row shows the cap). Baton's one-process rate sat at it. 100 ms lifts it past what
# a Python process processes; a full queue then costs ten checks a second. The restore and
# standby consumers derive from these settings too.
FETCH_DEFAULTS: dict[str, Any] = {"fetch.queue.backoff.ms": 100}

HEARTBEAT_MS = 1000  # the group member's heartbeat (see ClientSettings.membership)

CONSUMER_ONLY = frozenset(
    {
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "fetch.min.bytes",
        "fetch.wait.max.ms",
        "auto.offset.reset",
        "group.protocol",
        *FETCH_DEFAULTS,
    }
)


@dataclass(frozen=True)
class ClientSettings:
    """The clients of one worker process, named ``<application id>-<ident>`` so broker logs tell them apart."""

    config: WorkerConfig
    ident: str

    @property
    def app(self) -> str:
        return self.config.application_id

    @property
    def eos(self) -> bool:
        return self.config.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE_V2

    def base(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.config.bootstrap_servers, "client.id": f"{self.app}-{self.ident}"}

    def consumer(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            **self.base(),
            "group.id": self.app,  # committed offsets are read for it; it never joins (membership.py does)
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed" if self.eos else "read_uncommitted",
            **FETCH_DEFAULTS,
        }
        conf.update(
            {
                k.removeprefix("consumer."): v
                for k, v in self.config.kafka_config.items()
                if not k.startswith("producer.")
            }
        )
        return conf

    def producer(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            **self.base(),
            "partitioner": "murmur2_random",  # the Java client's partitioner: co-partitioning with JVM apps
            "linger.ms": 5,
            "enable.idempotence": True,
        }
        if self.eos:
            conf["transactional.id"] = f"{self.app}-{self.ident}"
            # Kafka Streams' EOS default: a dead owner blocks 10 s at most
            conf["transaction.timeout.ms"] = 10000
        conf.update(
            {
                k.removeprefix("producer."): v
                for k, v in self.config.kafka_config.items()
                if not k.startswith("consumer.") and k not in CONSUMER_ONLY
            }
        )
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
            "bootstrap_servers": self.config.bootstrap_servers.split(","),
            "client_id": f"{self.app}-{self.ident}",
            "heartbeat_interval_ms": HEARTBEAT_MS,
            **kafka_python_config(self.config.kafka_config),
        }

    def shared(self) -> dict[str, Any]:
        """Settings for a client that both reads and writes (the control-topic follower)."""
        return {
            k: v
            for k, v in self.config.kafka_config.items()
            if not k.startswith(("consumer.", "producer.")) and k not in CONSUMER_ONLY
        }
