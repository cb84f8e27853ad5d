"""Option parsing shared by the ``baton`` subcommands (click does the rest)."""

from __future__ import annotations

import click
from pydantic import ValidationError

# WorkerConfig field -> the flag that sets it, for errors a person reads
_FLAG_OF = {"topology": "TOPOLOGY"}


def key_values(_ctx: click.Context, _param: click.Parameter, values: tuple[str, ...]) -> dict[str, str]:
    """A repeatable ``KEY=VALUE`` option as a dict, refused with click's usage error if malformed."""
    out: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep:
            raise click.BadParameter(f"expected key=value, got {item!r}")
        out[key.strip()] = value.strip()
    return out


def readable_errors(exc: ValidationError) -> str:
    """pydantic's errors as one line each, naming the flag: ``--application-id: required``."""
    lines = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"])
        flag = _FLAG_OF.get(field, "--" + field.replace("_", "-")) if field else ""
        msg = str(err["msg"]).removeprefix("Value error, ")
        if err["type"] == "missing":
            msg = f"required: pass {'it' if flag.isupper() else flag} or set BATON_{field.upper()}"
        lines.append(f"{flag}: {msg}" if flag else msg)
    return "; ".join(lines)
