"""``baton compact``: snapshot and audit an app's changelogs (also runnable with spark-submit).

    baton compact --application-id click-counter-blue --application-id click-counter-green \\
        --snapshot-store s3a://bucket/baton --bootstrap-servers kafka:9092 --topology examples.click_counter

Under spark-submit: ``spark-submit --jars <spark-sql-kafka jars> baton/compactor/cli.py <same arguments>``;
``getOrCreate`` reuses the session spark-submit made.
The exit code is 0 when the audit found nothing, 3 when it has findings (``--fail-on-findings``),
4 when ``--streamapp`` is given and its status could not be written.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path
from tempfile import gettempdir
from typing import Any

import click

from baton.cli_options import key_values
from baton.clients import preflight
from baton.clients.options import kafka_options, settings_from_options
from baton.clients.settings import COMPACTOR_CLIENTS
from baton.compactor.job import REPORT_DIR
from baton.worker.config import env_var


@click.command()
@click.option(
    "--application-id",
    "application_ids",
    multiple=True,
    required=True,
    envvar="BATON_APPLICATION_IDS",
    help="Application id (one color) to compact; repeatable.",
)
@click.option(
    "--snapshot-store",
    required=True,
    envvar="BATON_SNAPSHOT_STORE",
    help="Root URI of snapshots and reports: a path, file://, hdfs://, s3a://...",
)
@click.option(
    "--s3-endpoint",
    envvar=env_var("snapshot_s3_endpoint"),
    help="http(s):// URL of the S3-compatible server of an s3a:// store (path-style); unset: AWS.",
)
@click.option("--s3-region", envvar=env_var("snapshot_s3_region"), help="Region of an s3a:// store.")
@click.option("--bootstrap-servers", required=True, envvar="BATON_BOOTSTRAP_SERVERS")
@click.option(
    "--topology", envvar="BATON_TOPOLOGY", help="The app's topology, to audit stores against a recomputation."
)
@click.option(
    "--keep",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    envvar="BATON_SNAPSHOT_KEEP",
    help="Snapshots kept per changelog partition.",
)
@click.option(
    "--jars",
    envvar="BATON_SPARK_JARS",
    help="Comma-separated spark-sql-kafka jars (not needed under spark-submit --jars/--packages).",
)
@click.option("--master", envvar="BATON_SPARK_MASTER", help="Spark master, e.g. local[2]; default: Spark's.")
@click.option(
    "--conf",
    "spark_conf",
    multiple=True,
    callback=key_values,
    metavar="KEY=VALUE",
    help="Spark setting (repeatable), e.g. spark.driver.memory=4g.",
)
@kafka_options
@click.option(
    "--kafka-config-json",
    envvar="BATON_KAFKA_CONFIG",
    help="Kafka client settings as a JSON object (the workers' BATON_KAFKA_CONFIG); the file and -X win.",
)
@click.option("--fail-on-findings", is_flag=True, help="Exit with 3 when the audit has findings.")
@click.option(
    "--streamapp",
    envvar="BATON_STREAMAPP",
    metavar="NAMESPACE/NAME",
    help="Write the audit summary into this StreamApp's status.compaction (in-cluster or KUBECONFIG).",
)
def compact(
    *,
    application_ids: tuple[str, ...],
    snapshot_store: str,
    s3_endpoint: str | None,
    s3_region: str | None,
    bootstrap_servers: str,
    topology: str | None,
    keep: int,
    jars: str | None,
    master: str | None,
    spark_conf: dict[str, str],
    kafka_config: dict[str, str],
    kafka_config_file: Path | None,
    kafka_config_json: str | None,
    fail_on_findings: bool,
    streamapp: str | None,
) -> None:
    """Snapshot every changelog partition of the app ids, keep the last N, and write an audit report."""
    from baton.compactor.job import JobConfig, run
    from baton.compactor.s3a import hadoop_settings
    from baton.compactor.session import driver_settings, session
    from baton.worker.state.snapshot_uri import S3Settings

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    target = _streamapp(streamapp)
    from_json = {k: str(v) for k, v in json.loads(kafka_config_json or "{}").items()}
    settings = settings_from_options(
        bootstrap_servers, kafka_config_file, kafka_config, COMPACTOR_CLIENTS, from_json
    )
    kafka_config = dict(settings.properties)
    try:
        preflight.check(settings)
    except preflight.KafkaUnreachable as exc:
        raise click.ClickException(str(exc)) from None
    ids = [i for item in application_ids for i in item.split(",") if i]  # the env var is comma-separated
    try:
        s3 = S3Settings(s3_endpoint, s3_region)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--s3-endpoint") from exc
    # the user's --conf wins; a driver in a Pod on Kubernetes learns its Pod at start
    conf = (
        hadoop_settings(snapshot_store, s3)
        | driver_settings(master, os.environ, Path(gettempdir()))
        | spark_conf
    )
    spark = session(master, jars.split(",") if jars else None, conf=conf)
    report = run(spark, JobConfig(bootstrap_servers, ids, snapshot_store, keep, topology, kafka_config))
    click.echo(json.dumps(report["summary"], indent=2))
    if target is not None:
        _write_status(target, report, f"{snapshot_store.rstrip('/')}/{ids[0]}/{REPORT_DIR}/latest.json")
    if fail_on_findings and report["findings"]:
        sys.exit(3)


def _streamapp(ref: str | None) -> tuple[str, str] | None:
    from baton.compactor.status import parse_streamapp

    try:
        return parse_streamapp(ref) if ref else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--streamapp") from exc


def _write_status(target: tuple[str, str], report: dict[str, Any], report_uri: str) -> None:
    """Best effort: the snapshots and the report are already written, which is what restores need;
    a status the API server refused is logged and makes the exit code 4, so the Job shows it."""
    from datetime import UTC, datetime

    from baton.compactor.status import compaction_status, write_status

    finished = datetime.now(UTC).isoformat(timespec="seconds")
    try:
        write_status(*target, compaction_status(report, finished, report_uri))
    except Exception as exc:
        logging.getLogger("baton.compactor").error(
            "could not write status.compaction of %s/%s: %s", *target, exc
        )
        sys.exit(4)


if __name__ == "__main__":  # spark-submit baton/compactor/cli.py --application-id ...
    compact()
