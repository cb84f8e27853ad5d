"""upgrade.strategy Rolling: restart one Pod at a time, each only after the last is restored.

The StatefulSet runs with ``updateStrategy: OnDelete``, so a new template changes no Pod by
itself. Like Strimzi rolling Kafka brokers, the operator deletes one outdated Pod, waits
until its replacement is Ready (the worker's readiness means its tasks are restored and
caught up), and only then takes the next: never two workers restoring at once.
"""

from __future__ import annotations

from typing import Any

REVISION_LABEL = "controller-revision-hash"


def _ready(pod: dict[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def _ordinal(pod: dict[str, Any]) -> int:
    name = str(pod["metadata"]["name"])
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else -1


def next_pod_to_restart(pods: list[dict[str, Any]], update_revision: str, replicas: int) -> str | None:
    """The Pod to delete now, or None (all updated, or one is not Ready yet: wait).

    Highest ordinal first, as the StatefulSet controller's own rolling update does.
    """
    if not update_revision or len(pods) < replicas:
        return None  # a Pod is being recreated
    if any(p["metadata"].get("deletionTimestamp") or not _ready(p) for p in pods):
        return None
    outdated = [p for p in pods if (p["metadata"].get("labels") or {}).get(REVISION_LABEL) != update_revision]
    if not outdated:
        return None
    return str(max(outdated, key=_ordinal)["metadata"]["name"])
