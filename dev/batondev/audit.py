"""The local API server's audit log, read back: who asked for what, and when.

`dev/stack` starts kube-apiserver with a Metadata-level audit policy (batondev.kube), so the
operator's requests can be counted by the API server itself, by user agent, rather than by
the client that might be wrong about what it sends (bench/operator_scale.py, and a test that
a reconciliation pass at rest makes no request).
"""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from dataclasses import dataclass

from batondev import kube


@dataclass(frozen=True)
class Request:
    at: float  # requestReceivedTimestamp, seconds since the epoch
    agent: str  # the user agent's product token, e.g. "baton-operator" or "kopf"
    verb: str
    resource: str
    namespace: str
    name: str


def _seconds(value: object) -> float | None:
    if not value:
        return None
    return datetime.datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()


def requests(since: float, until: float, namespace: str | None = None) -> Iterator[Request]:
    """Requests received in [since, until) (in ``namespace`` only, if given), oldest file first."""
    log = kube.audit_log()
    for path in sorted(log.parent.glob(f"{log.stem}*{log.suffix}"), key=lambda p: p.stat().st_mtime):
        with path.open(errors="replace") as f:
            for line in f:
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                at = _seconds(event.get("requestReceivedTimestamp"))
                if at is None or not since <= at < until:
                    continue
                ref = event.get("objectRef") or {}
                if namespace is not None and ref.get("namespace") != namespace:
                    continue
                agent = str(event.get("userAgent", "")).split(" ")[0].split("/")[0]
                yield Request(
                    at,
                    agent,
                    str(event.get("verb", "")),
                    str(ref.get("resource", ""))
                    + (f"/{ref['subresource']}" if ref.get("subresource") else ""),
                    str(ref.get("namespace", "")),
                    str(ref.get("name", "")),
                )
