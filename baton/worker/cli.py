"""``baton run``: run a worker process for a topology (or ``--processes N`` of them under a supervisor).

Every option can also come from its ``BATON_*`` environment variable (how the operator
configures pods); flags win over the environment. Validation is WorkerConfig's.
"""

from __future__ import annotations

import logging
import os
import sys
import traceback
from pathlib import Path
from typing import Any

import click
from confluent_kafka import KafkaException
from pydantic import ValidationError

from baton.cli_options import readable_errors
from baton.clients import preflight
from baton.clients.authorization import authorization_error, missing_permission
from baton.clients.options import kafka_options
from baton.worker.config import (
    LAPTOP_STATE_DIR,
    ErrorHandler,
    LogLevel,
    ProcessingGuarantee,
    StoreKind,
    WorkerConfig,
)
from baton.worker.processes.join import JoinBarrier
from baton.worker.topology.dsl import TopologyError
from baton.worker.topology.graph import BuiltTopology

log = logging.getLogger(__name__)


class ConfigError(click.ClickException):
    """A usage error without click's usage block: the message names the flag and the variable,
    so ``Error:`` and one line are the whole story (a UsageError adds three lines above it)."""

    exit_code = 2


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
@click.option(
    "--log-level",
    type=click.Choice([level.value for level in LogLevel]),
    envvar="BATON_LOG_LEVEL",
    help="Level of all the worker's logs, librdkafka's included; debug also shows the traceback "
    "of a topology that fails to load.",
)
@kafka_options
def run(topology: str | None, kafka_config: dict[str, str], **options: Any) -> None:
    """Run a worker for TOPOLOGY (PATH_OR_MODULE[:ATTR], default attribute `topology`)."""
    from baton.worker import logs
    from baton.worker.runtime.health import PortTaken
    from baton.worker.runtime.worker import Worker

    given = {k: v for k, v in options.items() if v is not None}
    if topology is not None:
        given["topology"] = topology
    if kafka_config:
        given["kafka_config"] = kafka_config
    try:
        config = WorkerConfig(**given)
    except ValidationError as exc:
        raise ConfigError(readable_errors(exc)) from exc
    barrier = JoinBarrier.from_env(os.environ)  # a child of a supervisor: join with its siblings
    # which of a pod's processes speaks: its instance id, or (dynamic members) its place in the pod
    member = config.instance_id or (None if barrier is None else f"process-{barrier.index}")
    logs.setup(
        config.application_id, level=logging.getLevelNamesMapping()[config.log_level.upper()], member=member
    )
    # everything that can be wrong with the command is said before anything is created:
    # the state dir, the topology (no broker needed), the Kafka settings and the broker, the
    # input topics
    if "state_dir" in given and not _writable(config.state_dir):
        raise click.ClickException(
            f"state dir {config.state_dir} cannot be created or written by this user; "
            "choose another with --state-dir"
        )
    built = _load(config)  # in a supervisor too: a broken topology fails once, here
    try:  # one line for a broker that cannot be reached or refuses us, not pages of librdkafka's
        preflight.check(config.kafka_settings())
        missing = preflight.missing_topics(config.kafka_settings(), built.input_topics())
    except preflight.KafkaUnreachable as exc:
        raise click.ClickException(str(exc)) from None
    if missing:
        raise click.ClickException(_missing_topics(missing, config.bootstrap_servers))
    if config.zone_node_label and not config.zone:  # spec.rack: the zone is the Node's label
        from baton.worker.zone import with_node_zone

        config = with_node_zone(config)
    if barrier is None:  # a supervisor's children get both from it
        config = laptop_defaults(config, given)
    if config.processes > 1:
        from baton.worker.processes.supervisor import Supervisor

        try:
            sys.exit(Supervisor(config).run())
        except PortTaken as exc:
            raise click.ClickException(str(exc)) from None
    worker = (
        Worker(config, built)
        if barrier is None
        else Worker(config, built, before_join=barrier.before_join, pod_processes=barrier.parties)
    )
    try:
        code = worker.run()
    except PortTaken as exc:
        raise click.ClickException(str(exc)) from None
    except KafkaException as exc:  # while starting: say a missing ACL as the grant to add
        err = authorization_error(exc)
        if err is None:
            raise
        raise click.ClickException(missing_permission(err, config.application_id)) from None
    sys.exit(code)


def laptop_defaults(config: WorkerConfig, given: dict[str, Any]) -> WorkerConfig:
    """Unset state dir and port that would fail on a laptop, replaced (and logged).

    The defaults suit a Pod (the operator sets both anyway); on a laptop /var/lib/baton is
    root's and a second ``baton run``, to watch the group rebalance as with a second Kafka
    Streams instance, finds 8080 taken. A value that was given is kept: its failure is an error.
    """
    from baton.worker.runtime.health import port_free

    changes: dict[str, Any] = {}
    if "state_dir" not in given and not _writable(config.state_dir):
        changes["state_dir"] = LAPTOP_STATE_DIR.absolute()
        log.info(
            "state in ./.baton-state: /var/lib/baton is not writable (--state-dir chooses)",
            extra={"state_dir": str(changes["state_dir"])},
        )
    if "metrics_port" not in given and not port_free(config.metrics_port):
        changes["metrics_port"] = 0 if config.processes > 1 else _free_port()
        log.warning(
            f"port {config.metrics_port} is in use: /metrics, /healthz, /readyz on "
            f"{changes['metrics_port'] or 'a free port'} (--metrics-port chooses)",
            extra={"port": changes["metrics_port"]},
        )
    return config.model_copy(update=changes) if changes else config


def _writable(path: Path) -> bool:
    """Whether this user can write ``path``, or create it (its first existing ancestor is a
    folder this user may write)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path.is_dir() and os.access(path, os.W_OK)


def _free_port() -> int:
    from baton.worker.processes.supervisor import free_ports

    return free_ports(1)[0]


def _load(config: WorkerConfig) -> BuiltTopology:
    return _load_or_fail(config.topology, debug=config.log_level is LogLevel.DEBUG)


def _load_or_fail(topology: str, *, debug: bool) -> BuiltTopology:
    """The topology, or one line naming the user's file and line and what is wrong there."""
    from baton.worker.topology.loader import load

    try:
        return load(topology)
    except Exception as exc:
        if debug:
            raise
        where = _user_frame(exc)
        what = str(exc) if isinstance(exc, TopologyError) else f"{type(exc).__name__}: {exc}"
        more = "" if isinstance(exc, TopologyError) else " (--log-level debug shows the traceback)"
        raise click.ClickException(f"{where or f'topology {topology}: '}{what}{more}") from None


def _user_frame(exc: BaseException) -> str:
    """``app.py:5: ``, the last line of the user's code the error passed through (not Baton's)."""
    package = str(Path(__file__).resolve().parents[1])
    frames = [
        f
        for f in traceback.extract_tb(exc.__traceback__)
        if not f.filename.startswith(("<", package)) and "importlib" not in f.filename
    ]
    if not frames:
        return ""
    return f"{os.path.relpath(frames[-1].filename)}:{frames[-1].lineno}: "


def _missing_topics(missing: list[str], bootstrap: str) -> str:
    """Kafka Streams' MissingSourceTopicException, with the command that creates them."""
    names = ", ".join(repr(t) for t in missing)
    first = bootstrap.split(",", maxsplit=1)[0]
    return (
        f"input topic{'s' if len(missing) > 1 else ''} {names} not found on {bootstrap}; create "
        f"{'them' if len(missing) > 1 else 'it'} first, e.g. kafka-topics.sh --bootstrap-server {first} "
        f"--create --topic {missing[0]} --partitions 3"
    )


@click.command()
@click.argument("topology", envvar="BATON_TOPOLOGY")
@click.option(
    "--application-id",
    envvar="BATON_APPLICATION_ID",
    default="<application.id>",
    show_default=True,
    help="Prefix of the internal topics' names.",
)
def describe(topology: str, application_id: str) -> None:
    """Print TOPOLOGY's sub-topologies, stores and topics (Kafka Streams' Topology#describe).

    No broker is needed: what a worker would create and read is known from the code alone.
    """
    from baton.worker.naming import changelog_topic, dlq_topic, internal_topic
    from baton.worker.topology.graph import SinkNode, reachable

    built = _load_or_fail(topology, debug=False)
    click.echo(built.describe())
    outputs = sorted(
        {
            n.topic
            for sub in built.subtopologies
            for n in reachable(list(sub.sources))
            if isinstance(n, SinkNode) and not n.internal
        }
    )
    stores = [
        f"{s.name} (changelog {s.source_topic or changelog_topic(application_id, s.name)})"
        for s in built.stores()
    ]
    stores += [f"{g.store.name} (global, from {g.store.source_topic})" for g in built.global_tables]
    internal = [internal_topic(application_id, t) for t in built.repartition_topics]
    internal += [changelog_topic(application_id, s.name) for s in built.stores() if not s.source_topic]
    for title, items in (
        ("Stores", stores),
        ("Input topics (must exist)", built.input_topics()),
        ("Output topics", outputs),
        ("Internal topics (created by the worker)", [*internal, dlq_topic(application_id)]),
    ):
        click.echo(f"{title}:")
        for item in items:
            click.echo(f"  {item}")
