"""The deploy state a StreamApp carries in ``status.deploy``: which spec each color runs.

The operator keeps no deploy state in memory: a restarted operator (or the other replica
after a leader change) continues a deploy from this record. It says, per color, which spec
revision (the hash of the deployed fields, see ``spec_hash``) and which application id
generation the color runs, and keeps the specs those revisions stand for, because the
StreamApp itself only holds the newest spec while the old color must keep running the
previous one as a rollback target.

Times are RFC 3339 strings on the wire and seconds since the epoch in Python.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from baton.control.messages import COLORS, Color

Phase = Literal["Deploying", "Promoting", "Flipping", "RollingBack", "Stable"]


@dataclass(frozen=True)
class Assignment:
    """What one color runs: a spec revision and an application id generation."""

    revision: str
    generation: int = 0  # bumped by a Rebuild: a fresh consumer group, changelogs and state


@dataclass(frozen=True)
class DeployRecord:
    """``status.deploy``: the deploy machine's memory between reconciliations."""

    colors: dict[Color, Assignment]
    specs: dict[str, str] = field(default_factory=dict)  # revision -> spec as JSON (camelCase)
    phase: Phase = "Stable"
    target: Color | None = None  # the color a deploy is bringing to ``revision``
    revision: str = ""  # the revision being deployed
    started_at: float | None = None
    ready_since: float | None = None  # target Ready and lag <= maxLagToPromote since
    flip_to: Color | None = None  # set while Flipping / RollingBack (survives a restart)
    retry_at: float | None = None  # after an aborted flip, try again from then on
    flip_attempts: int = 0
    standby: Color | None = None  # the old color, waiting for its upgrade after a flip
    flipped_at: float | None = None
    abandoned: str = ""  # why the deploy of ``revision`` was given up (Stalled)
    rolled_back: str = ""  # a revision rolled back by the user: never promoted automatically
    # colors whose StatefulSet has existed: one of them found deleted is recreated at its own
    # revision (it has state and output to protect); one never created takes the current spec
    created: tuple[Color, ...] = ()

    def with_(self, **changes: Any) -> DeployRecord:
        return replace(self, **changes)


def _ts(value: float | None) -> str | None:
    if value is None:
        return None
    return datetime.datetime.fromtimestamp(value, datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_ts(value: Any) -> float | None:
    if not value:
        return None
    text = str(value).replace("Z", "+00:00")
    return datetime.datetime.fromisoformat(text).timestamp()


def _color(value: Any) -> Color | None:
    return value if value in COLORS else None


def to_status(record: DeployRecord) -> dict[str, Any]:
    """The record as ``status.deploy`` (unset fields left out, so the status stays readable)."""
    out: dict[str, Any] = {
        "phase": record.phase,
        "colors": {c: {"revision": a.revision, "generation": a.generation} for c, a in record.colors.items()},
        "specs": dict(record.specs),
    }
    optional: dict[str, Any] = {
        "target": record.target,
        "revision": record.revision or None,
        "startedAt": _ts(record.started_at),
        "readySince": _ts(record.ready_since),
        "flipTo": record.flip_to,
        "retryAt": _ts(record.retry_at),
        "flipAttempts": record.flip_attempts or None,
        "standby": record.standby,
        "flippedAt": _ts(record.flipped_at),
        "abandoned": record.abandoned or None,
        "rolledBack": record.rolled_back or None,
        "created": list(record.created) or None,
    }
    out.update({k: v for k, v in optional.items() if v is not None})
    return out


def from_status(raw: dict[str, Any] | None) -> DeployRecord | None:
    """Parse ``status.deploy``; None when absent (a new app, or one from before deploys)."""
    if not raw or not raw.get("colors"):
        return None
    colors: dict[Color, Assignment] = {}
    for name, value in (raw.get("colors") or {}).items():
        color = _color(name)
        if color is not None and value.get("revision"):
            colors[color] = Assignment(str(value["revision"]), int(value.get("generation") or 0))
    if not colors:
        return None
    phase = raw.get("phase")
    return DeployRecord(
        colors=colors,
        specs={str(k): str(v) for k, v in (raw.get("specs") or {}).items()},
        phase=phase if phase in ("Deploying", "Promoting", "Flipping", "RollingBack", "Stable") else "Stable",
        target=_color(raw.get("target")),
        revision=str(raw.get("revision") or ""),
        started_at=_parse_ts(raw.get("startedAt")),
        ready_since=_parse_ts(raw.get("readySince")),
        flip_to=_color(raw.get("flipTo")),
        retry_at=_parse_ts(raw.get("retryAt")),
        flip_attempts=int(raw.get("flipAttempts") or 0),
        standby=_color(raw.get("standby")),
        flipped_at=_parse_ts(raw.get("flippedAt")),
        abandoned=str(raw.get("abandoned") or ""),
        rolled_back=str(raw.get("rolledBack") or ""),
        created=tuple(c for c in COLORS if c in (raw.get("created") or ())),
    )


def spec_json(spec: dict[str, Any]) -> str:
    """A spec as stored in ``specs``: compact, keys sorted, so equal specs store equal strings."""
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))
