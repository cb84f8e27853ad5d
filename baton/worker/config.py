"""The worker's configuration: one model, read from CLI flags and ``BATON_*`` variables.

This model is the single source of truth for worker settings. The operator sets the
same names as environment variables on each Pod (see ``baton.operator``), and a test
checks that every variable the operator sets is a field here, so the two cannot drift.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from baton.clients.properties import read_properties
from baton.clients.settings import WORKER_CLIENTS, KafkaSettings
from baton.worker.state.snapshot_uri import S3Settings, readable

DEFAULT_STATE_DIR = Path("/var/lib/baton")  # the operator's volume; also set explicitly there
LAPTOP_STATE_DIR = Path(".baton-state")  # unset state dir that /var/lib/baton cannot be for this user
DEFAULT_METRICS_PORT = 8080


class ProcessingGuarantee(StrEnum):
    EXACTLY_ONCE_V2 = "exactly_once_v2"
    AT_LEAST_ONCE = "at_least_once"


class ErrorHandler(StrEnum):
    """What to do with a record that fails to deserialize or process."""

    DLQ = "dlq"  # send it to <application.id>-dlq with headers and go on
    FAIL = "fail"  # stop the worker (the record stays uncommitted)


class LogLevel(StrEnum):
    """The level of every logger: Baton's, librdkafka's (``baton.librdkafka``) and the group's."""

    DEBUG = "debug"
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"


class StoreKind(StrEnum):
    ROCKSDB = "rocksdb"
    MEMORY = "memory"


class WorkerConfig(BaseSettings):
    """Settings of one worker process. Field names map to ``BATON_<NAME>`` variables."""

    model_config = SettingsConfigDict(env_prefix="BATON_", extra="forbid", frozen=True)

    topology: str = Field(description="Python module or file path, optionally ':attr', of the Topology")
    bootstrap_servers: str = Field(description="Kafka bootstrap servers, host:port[,host:port]")
    application_id: str = Field(
        description="Kafka Streams-style application.id: consumer group, prefix of internal topics",
        pattern=r"^[a-zA-Z0-9._-]{1,200}$",
    )
    state_dir: Path = Field(
        default=DEFAULT_STATE_DIR,
        description="Root of the local state stores; unset and /var/lib/baton not writable (a laptop): "
        "./.baton-state, logged",
    )
    processing_guarantee: ProcessingGuarantee = ProcessingGuarantee.EXACTLY_ONCE_V2
    commit_interval_ms: int | None = Field(
        default=None, ge=1, description="Commit interval; default 100 under exactly-once, 30000 otherwise"
    )
    instance_id: str | None = Field(
        default=None, description="Static membership: group.instance.id (the Pod name under the operator)"
    )
    num_standby_replicas: int = Field(
        default=0, ge=0, le=10, description="Standby copies of each task's stores on other members"
    )
    acceptable_recovery_lag: int = Field(
        default=10_000,
        ge=0,
        description="Kafka Streams' acceptable.recovery.lag: a member whose copy of a task's "
        "state is at most this many changelog records behind counts as caught up and may take the task as active",
    )
    max_warmup_replicas: int = Field(
        default=2,
        ge=1,
        description="Kafka Streams' max.warmup.replicas: how many warmup copies (state built on a "
        "member before it takes the task over) the group runs at once",
    )
    probing_rebalance_interval_ms: int = Field(
        default=600_000,
        ge=1_000,
        description="Kafka Streams' probing.rebalance.interval.ms: while warmups run, "
        "the group rebalances this often to hand caught-up warmups their tasks",
    )
    state_cleanup_delay_ms: int = Field(
        default=600_000,
        ge=0,
        description="Kafka Streams' state.cleanup.delay.ms: how long the stores of a task "
        "that is neither active nor standby here stay on disk (it may come back) before they are deleted",
    )
    processes: int = Field(
        default=1,
        ge=1,
        le=64,
        description="Worker processes in this pod, each a group member with its own state "
        "directory, behind one metrics/health port: Baton's num.stream.threads (one process uses one core)",
    )
    host: str | None = Field(
        default=None,
        description="The pod this process runs in: the assignor keeps a task's standbys off its "
        "active's host when another exists; default: the instance id, or the process id",
    )
    zone: str | None = Field(
        default=None,
        description="The failure domain this process runs in (a node's topology.kubernetes.io/zone): "
        "the assignor puts a task's standbys in other zones first, as Kafka Streams' rack-aware "
        "standbys do; also the consumers' client.rack (follower fetching, KIP-392) unless the Kafka "
        "settings name one; unset: standbys only avoid the active's host",
        max_length=253,
    )
    zone_node_label: str | None = Field(
        default=None,
        description="Read the zone from this label of the worker's Kubernetes Node (node_name) "
        "through the Kubernetes API at start, unless zone is given; a Node without the label "
        "leaves the zone unset (a warning says so). Strimzi's rack.topologyKey",
        max_length=317,
    )
    node_name: str | None = Field(
        default=None,
        description="The Kubernetes Node this worker runs on (the downward API's spec.nodeName); "
        "zone_node_label reads its label",
        max_length=253,
    )
    metrics_port: int = Field(
        default=DEFAULT_METRICS_PORT,
        ge=0,
        le=65535,
        description="Port of /metrics, /healthz, /readyz and the store queries; unset and 8080 in use "
        "(a second worker on a laptop): a free port, logged; set and in use: an error; 0: any free port",
    )
    log_level: LogLevel = Field(
        default=LogLevel.INFO, description="Level of all the worker's logs, librdkafka's included"
    )
    application_server: str | None = Field(
        default=None,
        description="Kafka Streams' application.server: the host (or host:port) other members and "
        "clients reach this process's HTTP port at, for interactive queries' routing; without a "
        "port the bound one is added; default 127.0.0.1",
    )
    error_handler: ErrorHandler = ErrorHandler.DLQ
    store: StoreKind = StoreKind.ROCKSDB
    write_cache: bool = Field(default=True, description="Collapse repeated updates of a key within a commit")
    cache_max_bytes: int = Field(
        default=10 * 1024 * 1024,
        ge=0,
        le=2**40,
        description="Kafka Streams' cache.max.bytes.buffering: the write caches of all of a "
        "process's tasks together; a store whose put goes over it is flushed at once (estimated bytes)",
    )
    repartition_purge_interval_ms: int = Field(
        default=30_000,
        ge=0,
        le=24 * 3600 * 1000,
        description="Kafka Streams' repartition.purge.interval.ms: how often records of repartition "
        "topics that every reader has committed past are deleted (delete-records); 0 purges after "
        "every commit",
    )
    shutdown_grace_seconds: float = Field(default=30.0, gt=0)
    color: str | None = Field(default=None, description="blue or green under blue-green deploys; None alone")
    control_topic: str | None = Field(default=None, description="<applicationId>-control under blue-green")
    replication_factor: int = Field(
        default=-1, ge=-1, description="Replication of internal topics the worker creates; -1: broker default"
    )
    snapshot_store: str | None = Field(
        default=None,
        description="Root of the compactor's changelog snapshots; a store restoring from scratch "
        "loads the newest one and replays only the changelog after it: a path, file:// or s3a://",
    )
    snapshot_s3_endpoint: str | None = Field(
        default=None,
        description="http(s):// URL of the S3-compatible server holding an s3a:// snapshot store "
        "(MinIO, Ceph, ...), addressed path-style; unset: AWS. Credentials: the AWS_* variables",
    )
    snapshot_s3_region: str | None = Field(default=None, description="Region of an s3a:// snapshot store")
    kafka_config: dict[str, str] = Field(
        default_factory=dict,
        description="librdkafka settings for every Kafka client (JSON in BATON_KAFKA_CONFIG); they win "
        "over the file's",
    )
    kafka_config_file: Path | None = Field(
        default=None,
        description="A properties file of librdkafka settings (key=value lines, as a client.properties): "
        "security.protocol, ssl.*, sasl.*, and tuning",
    )

    @model_validator(mode="after")
    def _zone_source(self) -> WorkerConfig:
        if self.zone_node_label and not self.node_name:
            raise ValueError(
                "zone_node_label needs node_name: the Kubernetes Node whose label is read "
                "(BATON_NODE_NAME, from the downward API's spec.nodeName)"
            )
        return self

    @model_validator(mode="after")
    def _kafka_settings(self) -> WorkerConfig:
        self.kafka_settings()  # refuses, naming the setting and the client, before anything starts
        return self

    def kafka_settings(self) -> KafkaSettings:
        """The one set of Kafka client settings: the file, then ``kafka_config`` over it."""
        layers: list[dict[str, str]] = []
        if self.kafka_config_file is not None:
            layers.append(read_properties(self.kafka_config_file))
        layers.append(self.kafka_config)
        return KafkaSettings.of(self.bootstrap_servers, *layers, clients=WORKER_CLIENTS)

    @field_validator("snapshot_store")
    @classmethod
    def _snapshot_store(cls, value: str | None) -> str | None:
        if value is not None:
            readable(value)
        return value

    @field_validator("snapshot_s3_endpoint")
    @classmethod
    def _snapshot_s3_endpoint(cls, value: str | None) -> str | None:
        S3Settings(endpoint=value)  # raises with the reason
        return value

    @field_validator("color")
    @classmethod
    def _color(cls, value: str | None) -> str | None:
        if value not in (None, "blue", "green"):
            raise ValueError("color must be 'blue' or 'green'")
        return value

    @property
    def effective_commit_interval_ms(self) -> int:
        """Kafka Streams' defaults: 100 ms under exactly-once, 30 s at-least-once."""
        if self.commit_interval_ms is not None:
            return self.commit_interval_ms
        return 100 if self.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE_V2 else 30_000


def env_var(field: str) -> str:
    """The environment variable that sets ``field`` (used by the operator's Pod builder)."""
    if field not in WorkerConfig.model_fields:
        raise KeyError(f"{field} is not a worker setting")
    return f"BATON_{field.upper()}"
