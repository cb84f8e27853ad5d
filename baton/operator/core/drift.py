"""Whether a live object still is what the operator applied: apply only what differs.

Server-side apply of an unchanged object changes nothing, but it is still a request (and a
dry-run and a GET before it): at hundreds of apps that was most of the operator's traffic.
A desired object is applied when

- the live object is not there, or was applied from another desired object: the hash of
  the desired object is stamped on it (``baton.dev/applied``), so a field the operator
  stopped setting (which SSA then removes) is noticed although the rest is a subset; or
- someone changed a field the operator sets (drift): every field of the desired object
  must be in the live one with the same value. The server adds defaults (a superset is
  fine); a value it normalises (``cpu: 0.5`` stored as ``500m``) reads as drift, which only
  costs an apply per pass, as before.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final

ANNOTATION_APPLIED: Final = "baton.dev/applied"


def desired_hash(obj: dict[str, Any]) -> str:
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def stamped(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with the hash of itself (without the stamp) in its annotations."""
    digest = desired_hash(obj)
    meta = dict(obj.get("metadata") or {})
    meta["annotations"] = {**(meta.get("annotations") or {}), ANNOTATION_APPLIED: digest}
    return {**obj, "metadata": meta}


def contains(live: Any, desired: Any) -> bool:
    """Every field of ``desired`` is in ``live`` with the same value (lists: same length, item by item)."""
    if isinstance(desired, dict):
        return isinstance(live, dict) and all(k in live and contains(live[k], v) for k, v in desired.items())
    if isinstance(desired, list):
        return (
            isinstance(live, list)
            and len(live) == len(desired)
            and all(contains(a, b) for a, b in zip(live, desired, strict=True))
        )
    return bool(live == desired)


def up_to_date(live: dict[str, Any] | None, desired: dict[str, Any]) -> bool:
    """Whether applying ``desired`` (already :func:`stamped`) could change ``live``."""
    if live is None:
        return False
    want = ((desired.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_APPLIED)
    have = ((live.get("metadata") or {}).get("annotations") or {}).get(ANNOTATION_APPLIED)
    return want is not None and want == have and contains(live, desired)


def schedule_changed(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """A ScheduledSparkApplication whose schedule an apply changed: the Spark Operator keeps the
    next run it computed from the old one until told otherwise (``Kube.reschedule``)."""
    if after.get("kind") != "ScheduledSparkApplication":
        return False
    return bool(before.get("spec", {}).get("schedule") != after.get("spec", {}).get("schedule"))
