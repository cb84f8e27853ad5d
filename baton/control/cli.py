"""``baton flip APP --to green``: flip the active color with Kafka access alone (no Kubernetes)."""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from baton.clients import preflight
from baton.clients.options import kafka_options, settings_from_options
from baton.clients.settings import CLI_CLIENTS

from .coordinator import flip as run_flip
from .messages import tp_str


@click.command()
@click.argument("application_id")
@click.option(
    "--to", "to", type=click.Choice(["blue", "green"]), required=True, help="The color to make active"
)
@click.option(
    "--bootstrap-servers", envvar="BATON_BOOTSTRAP_SERVERS", required=True, help="Kafka bootstrap servers"
)
@click.option(
    "--deadline-seconds",
    default=10.0,
    show_default=True,
    help="Abort unless every worker of both colors reported within this time",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON")
@kafka_options
def flip(  # noqa: PLR0917 (click passes every option by name)
    application_id: str,
    to: str,
    bootstrap_servers: str,
    deadline_seconds: float,
    as_json: bool,
    kafka_config_file: Path | None,
    kafka_config: dict[str, str],
) -> None:
    """Make TO the active color of APPLICATION_ID (the base applicationId, without -blue/-green).

    Both colors pause for two control-topic round trips; the cut is the further of their
    positions per input partition. Exits 1 when the flip aborted (the old color stays active)
    or was refused (the previous flip's old active has not emitted everything below its cut
    yet: flip again once it has).
    """
    settings = settings_from_options(bootstrap_servers, kafka_config_file, kafka_config, CLI_CLIENTS)
    try:
        preflight.check(settings)
    except preflight.KafkaUnreachable as exc:
        raise click.ClickException(str(exc)) from None
    result = run_flip(
        bootstrap_servers,
        application_id,
        to,  # type: ignore[arg-type]
        deadline_s=deadline_seconds,
        extra=settings.common(),
    )
    if as_json:
        click.echo(
            orjson.dumps(
                {
                    "epoch": result.epoch,
                    "to": result.to,
                    "committed": result.committed,
                    "reason": result.reason,
                    "cut": {tp_str(tp): off for tp, off in result.cut.items()},
                    "pending": [tp_str(tp) for tp in result.pending],
                    "pause_ms": round(result.pause_ms, 1),
                    "drained_ms": round(result.drained_ms, 1),
                    "drained": result.drained,
                }
            ).decode()
        )
    elif result.committed:
        click.echo(
            f"flipped {application_id} to {to} (epoch {result.epoch}): pause {result.pause_ms:.0f} ms, "
            f"{len(result.cut)} partitions cut, {len(result.pending)} waited for the old active"
        )
        if not result.drained:
            click.echo(f"warning: {result.reason}", err=True)
    else:
        click.echo(f"flip of {application_id} to {to} not done: {result.reason}", err=True)
    sys.exit(0 if result.committed else 1)
