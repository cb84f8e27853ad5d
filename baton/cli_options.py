"""Option parsing shared by the ``baton`` subcommands (click does the rest)."""

from __future__ import annotations

import click


def key_values(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """A repeatable ``KEY=VALUE`` option as a dict, refused with click's usage error if malformed."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out
