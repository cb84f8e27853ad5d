"""``baton run``: run a worker process for a topology (or ``--processes N`` of them under a supervisor).

Every option can also come from its ``BATON_*`` environment variable (how the operator
configures pods); flags win over the environment. Validation is WorkerConfig's.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaException
from pydantic import ValidationError

from baton.cli_options import readable_errors
from baton.clients import preflight
from baton.clients.authorization import authorization_error, missing_permission
from baton.clients.options import kafka_options
from baton.worker.config import ErrorHandler, ProcessingGuarantee, StoreKind, WorkerConfig
from baton.worker.processes.join import JoinBarrier


@click.command()
@click.argument("topology", required=False, envvar="BATON_TOPOLOGY")
@click.option("--bootstrap-servers", envvar="BATON_BOOTSTRAP_SERVERS", help="Kafka bootstrap servers.")
@click.option(
    "--application-id", envvar="BATON_APPLICATION_ID", help="Consumer group and internal topic prefix."
)
@click.option(
    "--state-dir", type=click.Path(path_type=Path), envvar="BATON_STATE_DIR", help="Root of the stores."
)
@click.option(
    "--processing-guarantee",
    type=click.Choice([g.value for g in ProcessingGuarantee]),
    envvar="BATON_PROCESSING_GUARANTEE",
)
@click.option("--instance-id", envvar="BATON_INSTANCE_ID", help="Static membership id (group.instance.id).")
@click.option(
    "--metrics-port", type=int, envvar="BATON_METRICS_PORT", help="Port of /metrics, /healthz, /readyz."
)
@click.option(
    "--num-standby-replicas",
    type=int,
    envvar="BATON_NUM_STANDBY_REPLICAS",
    help="Standby copies of each task's state on other workers.",
)
@click.option(
    "--acceptable-recovery-lag",
    type=int,
    envvar="BATON_ACCEPTABLE_RECOVERY_LAG",
    help="Changelog records a worker's copy of a task's state may be behind and still take the task "
    "as active (acceptable.recovery.lag).",
)
@click.option(
    "--max-warmup-replicas",
    type=int,
    envvar="BATON_MAX_WARMUP_REPLICAS",
    help="Warmup copies (state built before a task moves to a worker) the group runs at once "
    "(max.warmup.replicas).",
)
@click.option(
    "--probing-rebalance-interval-ms",
    type=int,
    envvar="BATON_PROBING_REBALANCE_INTERVAL_MS",
    help="While warmups run, rebalance this often to hand caught-up warmups their tasks "
    "(probing.rebalance.interval.ms).",
)
@click.option(
    "--state-cleanup-delay-ms",
    type=int,
    envvar="BATON_STATE_CLEANUP_DELAY_MS",
    help="Keep the stores of tasks that left this worker this long before deleting them.",
)
@click.option("--commit-interval-ms", type=int, envvar="BATON_COMMIT_INTERVAL_MS")
@click.option(
    "--error-handler", type=click.Choice([h.value for h in ErrorHandler]), envvar="BATON_ERROR_HANDLER"
)
@click.option("--store", type=click.Choice([s.value for s in StoreKind]), envvar="BATON_STORE")
@click.option("--write-cache/--no-write-cache", default=None, envvar="BATON_WRITE_CACHE")
@click.option(
    "--cache-max-bytes",
    type=int,
    envvar="BATON_CACHE_MAX_BYTES",
    help="Bound of all write caches together (cache.max.bytes.buffering); over it, a store flushes.",
)
@click.option(
    "--repartition-purge-interval-ms",
    type=int,
    envvar="BATON_REPARTITION_PURGE_INTERVAL_MS",
    help="How often consumed repartition records are deleted (repartition.purge.interval.ms).",
)
@click.option(
    "--application-server",
    envvar="BATON_APPLICATION_SERVER",
    help="Host (or host:port) where other pods reach this worker's HTTP port (application.server).",
)
@click.option("--shutdown-grace-seconds", type=float, envvar="BATON_SHUTDOWN_GRACE_SECONDS")
@click.option(
    "--processes",
    type=int,
    envvar="BATON_PROCESSES",
    help="Worker processes in this pod (one core each), each a group member; one port serves "
    "them all. Baton's num.stream.threads.",
)
@click.option(
    "--host",
    envvar="BATON_HOST",
    help="The pod this process runs in (standbys avoid their active's host); default: the instance id.",
)
@click.option(
    "--zone",
    envvar="BATON_ZONE",
    help="The failure domain (zone) this worker runs in: a task's standbys go to other zones first, "
    "and the consumers fetch from replicas in it (client.rack).",
)
@click.option(
    "--zone-node-label",
    envvar="BATON_ZONE_NODE_LABEL",
    help="Without --zone: read the zone from this label of the Kubernetes Node --node-name at start "
    "(e.g. topology.kubernetes.io/zone); the operator sets it for spec.rack.",
)
@click.option(
    "--node-name",
    envvar="BATON_NODE_NAME",
    help="The Kubernetes Node this worker runs on (the downward API's spec.nodeName).",
)
@kafka_options
def run(topology: str | None, kafka_config: dict[str, str], **options: Any) -> None:
    """Run a worker for TOPOLOGY (PATH_OR_MODULE[:ATTR], default attribute `topology`)."""
    from baton.worker import logs
    from baton.worker.runtime.worker import Worker
    from baton.worker.topology.loader import load

    given = {k: v for k, v in options.items() if v is not None}
    if topology is not None:
        given["topology"] = topology
    if kafka_config:
        given["kafka_config"] = kafka_config
    try:
        config = WorkerConfig(**given)
    except ValidationError as exc:
        raise click.UsageError(readable_errors(exc)) from exc
    barrier = JoinBarrier.from_env(os.environ)  # a child of a supervisor: join with its siblings
    # which of a pod's processes speaks: its instance id, or (dynamic members) its place in the pod
    member = config.instance_id or (None if barrier is None else f"process-{barrier.index}")
    logs.setup(config.application_id, member=member)
    if config.zone_node_label and not config.zone:  # spec.rack: the zone is the Node's label
        from baton.worker.zone import with_node_zone

        config = with_node_zone(config)
    try:  # one line for a broker that cannot be reached or refuses us, not pages of librdkafka's
        preflight.check(config.kafka_settings())
    except preflight.KafkaUnreachable as exc:
        raise click.ClickException(str(exc)) from None
    built = load(config.topology)  # in a supervisor too: a broken topology fails once, here
    if config.processes > 1:
        from baton.worker.processes.supervisor import Supervisor

        sys.exit(Supervisor(config).run())
    worker = (
        Worker(config, built)
        if barrier is None
        else Worker(config, built, before_join=barrier.before_join, pod_processes=barrier.parties)
    )
    try:
        code = worker.run()
    except KafkaException as exc:  # while starting: say a missing ACL as the grant to add
        err = authorization_error(exc)
        if err is None:
            raise
        raise click.ClickException(missing_permission(err, config.application_id)) from None
    sys.exit(code)
