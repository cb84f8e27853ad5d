"""The ``baton`` command: one entry point for the worker, the operator and the tools.

Each part registers its own subcommands from its own module, so the worker, the operator
and the compactor stay importable without each other's dependencies (the worker image has
no kopf; the operator image has no pyspark).
"""

from __future__ import annotations

import importlib

import click

from baton import __version__

# subcommand -> "module:attribute" of a click.Command, imported only when invoked
_COMMANDS = {
    "run": "baton.worker.cli:run",
    "describe": "baton.worker.cli:describe",
    "operator": "baton.operator.cli:operator",
    "render": "baton.operator.cli:render",
    "flip": "baton.control.cli:flip",
    "status": "baton.operator.cli:status",
    "compact": "baton.compactor.cli:compact",
}


class _LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = _COMMANDS.get(cmd_name)
        if target is None:
            return None
        module, attr = target.split(":")
        try:
            command = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError) as exc:
            raise click.ClickException(
                f"`baton {cmd_name}` is unavailable: {exc}. Install the extra it needs, "
                "e.g. pip install 'baton-streams[operator]' or 'baton-streams[compactor]'."
            ) from exc
        assert isinstance(command, click.Command)
        return command


@click.group(cls=_LazyGroup)
@click.version_option(__version__, prog_name="baton")
def main() -> None:
    """Baton: stateful stream applications on Kafka, run on Kubernetes."""


if __name__ == "__main__":
    main()
