"""Typed view of a StreamApp, parsed from the dict the API server (or a YAML file) gives.

The CRD (crds/streamapps.baton.dev.yaml) validates and defaults specs in the cluster; these
models repeat its defaults so `baton render` of a file without a cluster yields the same
objects, and a unit test checks that every default here equals the CRD's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from baton.control.messages import Color
from baton.operator.core.constants import API_VERSION, KIND


class _Model(BaseModel):
    """camelCase on the wire (as in the CRD), snake_case in Python; unknown fields refused."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class SecretRef(_Model):
    name: str


class TrustedCertificate(_Model):
    """Strimzi's CertSecretSource: a CA certificate in a Secret (its cluster CA Secret)."""

    secret_name: str
    certificate: str = "ca.crt"


class KafkaTls(_Model):
    """Strimzi's ClientTls: TLS to the brokers, trusting these certificates (none: the image's CAs)."""

    trusted_certificates: list[TrustedCertificate] = Field(default_factory=list)


class CertificateAndKey(_Model):
    """A client certificate and its key in one Secret, as Strimzi's KafkaUser writes them."""

    secret_name: str
    certificate: str = "user.crt"
    key: str = "user.key"


class PasswordSecret(_Model):
    secret_name: str
    password: str = "password"


class SecretKeyRef(_Model):
    secret_name: str
    key: str


class KafkaAuthentication(_Model):
    """Strimzi's KafkaClientAuthentication: tls, scram-sha-256/512, plain or oauth."""

    type: Literal["tls", "scram-sha-256", "scram-sha-512", "plain", "oauth"]
    certificate_and_key: CertificateAndKey | None = None
    username: str | None = None
    password_secret: PasswordSecret | None = None
    token_endpoint_uri: str | None = None
    client_id: str | None = None
    client_secret: SecretKeyRef | None = None
    scope: str | None = None

    @property
    def sasl_mechanism(self) -> str | None:
        return {
            "scram-sha-256": "SCRAM-SHA-256",
            "scram-sha-512": "SCRAM-SHA-512",
            "plain": "PLAIN",
            "oauth": "OAUTHBEARER",
        }.get(self.type)


class KafkaSpec(_Model):
    bootstrap_servers: str
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] = "PLAINTEXT"
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] = "SCRAM-SHA-512"
    replication_factor: int = -1
    secret_ref: SecretRef | None = None
    tls: KafkaTls | None = None
    authentication: KafkaAuthentication | None = None

    @property
    def strimzi_shaped(self) -> bool:
        """``tls``/``authentication`` (Strimzi's shape) replace securityProtocol and secretRef."""
        return self.tls is not None or self.authentication is not None

    @property
    def protocol(self) -> str:
        """security.protocol, from either shape."""
        if not self.strimzi_shaped:
            return self.security_protocol
        sasl = self.authentication is not None and self.authentication.sasl_mechanism is not None
        return ("SASL_" if sasl else "") + ("SSL" if self.tls is not None else "PLAINTEXT")

    @property
    def uses_sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def uses_tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")


class WorkerSpec(_Model):
    error_handler: Literal["dlq", "fail"] = "dlq"
    log_level: Literal["debug", "info", "warning", "error"] = "info"
    write_cache: bool = True
    cache_max_bytes: int = 10 * 1024 * 1024
    repartition_purge_interval_ms: int = 30_000
    shutdown_grace_seconds: int = 30
    metrics_port: int = 8080


class StateSpec(_Model):
    store: Literal["rocksdb", "memory"] = "rocksdb"
    size: str = "1Gi"
    storage_class_name: str | None = None


class ResourcesSpec(_Model):
    requests: dict[str, int | str] | None = None
    limits: dict[str, int | str] | None = None


class ServiceAccountTemplate(_Model):
    """The workers' account: an existing one (``name``), or the operator's with these metadata."""

    name: str | None = None
    annotations: dict[str, str] = Field(default_factory=dict)
    labels: dict[str, str] = Field(default_factory=dict)


class ProbeSpec(_Model):
    """Timing of one of the worker container's probes (what it checks stays the operator's)."""

    initial_delay_seconds: int | None = None
    period_seconds: int | None = None
    timeout_seconds: int | None = None
    failure_threshold: int | None = None
    success_threshold: int | None = None


class ProbesSpec(_Model):
    liveness: ProbeSpec = Field(default_factory=ProbeSpec)
    readiness: ProbeSpec = Field(default_factory=ProbeSpec)
    startup: ProbeSpec | None = None  # unset: no startup probe


class MetadataTemplate(_Model):
    """Extra labels and annotations on an object the operator makes (Strimzi's template.*.metadata)."""

    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class PodTemplateSpec(_Model):
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    env: list[dict[str, Any]] = Field(default_factory=list)
    env_from: list[dict[str, Any]] = Field(default_factory=list)
    node_selector: dict[str, str] = Field(default_factory=dict)
    tolerations: list[dict[str, Any]] = Field(default_factory=list)
    affinity: dict[str, Any] | None = None
    priority_class_name: str | None = None
    image_pull_secrets: list[SecretRef] = Field(default_factory=list)
    volumes: list[dict[str, Any]] = Field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = Field(default_factory=list)
    sidecars: list[dict[str, Any]] = Field(default_factory=list)
    init_containers: list[dict[str, Any]] = Field(default_factory=list)
    topology_spread_constraints: list[dict[str, Any]] = Field(default_factory=list)
    service_account: ServiceAccountTemplate = Field(default_factory=ServiceAccountTemplate)
    security_context: dict[str, Any] = Field(default_factory=dict)  # the Pod's, over the operator's
    container_security_context: dict[str, Any] = Field(default_factory=dict)  # the worker container's
    probes: ProbesSpec = Field(default_factory=ProbesSpec)
    stateful_set: MetadataTemplate = Field(default_factory=MetadataTemplate)
    persistent_volume_claim: MetadataTemplate = Field(default_factory=MetadataTemplate)


class RackSpec(_Model):
    """Strimzi's rack: each worker reads this label of its Node at start and takes its value as
    its zone (standbys go to other zones first; the consumers' ``client.rack``)."""

    topology_key: str = "topology.kubernetes.io/zone"


class PlacementSpec(_Model):
    """How each color's Pods spread: pod anti-affinity per ``topology_key`` (a Node label)."""

    anti_affinity: Literal["Preferred", "Required", "None"] = "Preferred"
    topology_key: str = "kubernetes.io/hostname"


class UpgradeSpec(_Model):
    strategy: Literal["BlueGreen", "Rolling"] = "BlueGreen"
    auto_promote: bool = True
    max_lag_to_promote: int = 1000
    promotion_stable_seconds: int = 30
    promotion_timeout_seconds: int = 1800
    standby_upgrade_delay_seconds: int = 300
    state_migration: Literal["Reuse", "Rebuild"] = "Reuse"


class AutoscalingStepPolicySpec(_Model):
    """HPA's HPAScalingPolicy: at most ``value`` Pods (or percent) of change per period."""

    type: Literal["Pods", "Percent"]
    value: int
    period_seconds: int


class AutoscalingRulesSpec(_Model):
    """HPA's HPAScalingRules, one per direction; unset fields take the autoscaler's defaults."""

    stabilization_window_seconds: int | None = None
    select_policy: Literal["Max", "Min", "Disabled"] = "Max"
    policies: list[AutoscalingStepPolicySpec] | None = None


class AutoscalingBehaviorSpec(_Model):
    scale_up: AutoscalingRulesSpec | None = None
    scale_down: AutoscalingRulesSpec | None = None


class AutoscalingSpec(_Model):
    """``spec.autoscaling`` (see baton.operator.core.autoscaling, ``AutoscalingPolicy.from_spec``)."""

    min_replicas: int = 1
    max_replicas: int
    target_utilization: float = 0.7
    lag_records: int | None = None
    lag_seconds: float | None = None
    latency_p99_seconds: float | None = None
    drain_seconds: int = 120
    tolerance: float = 0.2
    step_timeout_seconds: int = 900
    behavior: AutoscalingBehaviorSpec | None = None


class SparkSpec(_Model):
    """Spark's resources for the compaction job; unset values are Spark's defaults."""

    driver_memory: str | None = None
    driver_cores: int | None = None
    executor_memory: str | None = None
    executor_cores: int | None = None
    max_cores: int | None = None
    executor_instances: int | None = None
    conf: dict[str, str] = Field(default_factory=dict)


class SparkOperatorSpec(_Model):
    """How runs look to the Kubeflow Spark Operator (runner: SparkOperator)."""

    driver_service_account: str = "spark-operator-spark"


class KubernetesRunnerSpec(_Model):
    """How runs look under runner Kubernetes (the Pod drives, executors are Pods)."""

    service_account: str = "spark"


class S3CredentialsRef(_Model):
    """A Secret holding an access key pair; the key names default to the AWS variables'."""

    name: str
    access_key_id_key: str = "AWS_ACCESS_KEY_ID"
    secret_access_key_key: str = "AWS_SECRET_ACCESS_KEY"


class ObjectStoreSpec(_Model):
    """Where an ``s3a://`` snapshot store is served, for the Job and the workers alike."""

    endpoint: str | None = None
    region: str | None = None
    credentials_secret: S3CredentialsRef | None = None


class CompactionSpec(_Model):
    enabled: bool = False
    schedule: str = "17 3 * * *"
    suspend: bool = False
    image: str | None = None
    snapshot_store: str | None = None
    snapshot_volume_claim: str | None = None
    object_store: ObjectStoreSpec | None = None
    runner: Literal["CronJob", "Kubernetes", "SparkOperator"] = "CronJob"
    kubernetes: KubernetesRunnerSpec = Field(default_factory=KubernetesRunnerSpec)
    spark_operator: SparkOperatorSpec = Field(default_factory=SparkOperatorSpec)
    keep: int = 3
    spark_master: str = "local[*]"
    spark: SparkSpec = Field(default_factory=SparkSpec)
    active_deadline_seconds: int = 21600
    resources: ResourcesSpec | None = None


class StreamAppSpec(_Model):
    image: str
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    topology: str
    kafka: KafkaSpec
    application_id: str | None = None
    replicas: int = 1
    processes_per_pod: int = 1
    standby_replicas: int = 0
    acceptable_recovery_lag: int = 10_000
    max_warmup_replicas: int = 2
    probing_rebalance_interval_ms: int = 600_000
    processing_guarantee: Literal["exactly_once_v2", "at_least_once"] = "exactly_once_v2"
    commit_interval_ms: int | None = None
    config: dict[str, str] = Field(default_factory=dict)
    worker: WorkerSpec = Field(default_factory=WorkerSpec)
    state: StateSpec = Field(default_factory=StateSpec)
    resources: ResourcesSpec | None = None
    pod_template: PodTemplateSpec = Field(default_factory=PodTemplateSpec)
    rack: RackSpec | None = None
    placement: PlacementSpec = Field(default_factory=PlacementSpec)
    upgrade: UpgradeSpec = Field(default_factory=UpgradeSpec)
    compaction: CompactionSpec = Field(default_factory=CompactionSpec)
    autoscaling: AutoscalingSpec | None = None
    paused: bool = False
    restart_nonce: str | None = None
    deletion_policy: Literal["Retain", "DeleteTopics"] = "Retain"


class StreamApp(_Model):
    """The parts of a StreamApp object the builders need: identity and spec."""

    name: str
    namespace: str
    uid: str | None  # None for a manifest file that was never applied (`baton render`)
    generation: int
    spec: StreamAppSpec

    @property
    def application_id(self) -> str:
        return self.spec.application_id or self.name

    def color_application_id(self, color: Color, generation: int = 0) -> str:
        """Each color is its own Kafka Streams app: own group, changelogs and state.

        A Rebuild gives a color a new generation: ``<applicationId>-<color>-g<N>``.
        """
        return (
            f"{self.application_id}-{color}"
            if generation == 0
            else f"{self.application_id}-{color}-g{generation}"
        )

    @property
    def control_topic(self) -> str:
        return f"{self.application_id}-control"

    @property
    def colors(self) -> tuple[Color, ...]:
        """The colors that run: both under BlueGreen, only blue under Rolling."""
        return ("blue",) if self.spec.upgrade.strategy == "Rolling" else ("blue", "green")

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> StreamApp:
        """Parse a StreamApp object (from the API server or a manifest file).

        A manifest file has no uid or generation yet, so `baton render` works offline and
        renders objects without owner references.
        """
        if body.get("apiVersion") != API_VERSION or body.get("kind") != KIND:
            raise ValueError(f"not a {API_VERSION} {KIND}: {body.get('apiVersion')} {body.get('kind')}")
        meta = body.get("metadata") or {}
        return cls(
            name=meta["name"],
            namespace=meta.get("namespace") or "default",
            uid=meta.get("uid"),
            generation=int(meta.get("generation") or 1),
            spec=StreamAppSpec.model_validate(body.get("spec") or {}),
        )
