"""kopf handlers: thin glue from watch events to :mod:`baton.operator.reconcile`.

- create/update/resume of a StreamApp, and a periodic timer (drift, lag): full reconcile;
- any change of a StatefulSet the operator owns: status refresh (fast `kubectl wait`);
- delete with deletionPolicy DeleteTopics: delete internal topics (kopf's finalizer,
  added only to apps with that policy, holds the deletion until it is done).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any, cast

import kopf

from baton.operator import reconcile as rec
from baton.operator.constants import FINALIZER, GROUP, PLURAL, VERSION
from baton.operator.kube import Kube
from baton.operator.topics import KafkaUnavailableError


@dataclass(frozen=True)
class Options:
    """Operator settings from the command line, passed to kopf through its memo."""

    peering_lifetime: int = 60
    kafka: bool = True


def _events(body: dict[str, Any], type_: str, reason: str, message: str) -> None:
    # Event messages are limited to 1 KiB by the API server.
    kopf.event(cast(kopf.Body, body), type=type_, reason=reason, message=message[:1000])


def _kube(memo: kopf.Memo) -> Kube:
    kube: Kube = memo["kube"]
    return kube


def _options(memo: kopf.Memo) -> Options:
    options: Options = memo.get("options", Options())
    return options


@kopf.on.startup()
def configure(*, settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    options = _options(memo)
    # Progress and the diff base live in annotations: the status belongs to baton alone.
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=GROUP)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
        prefix=GROUP, key="last-handled-configuration"
    )
    settings.persistence.finalizer = FINALIZER
    settings.peering.lifetime = options.peering_lifetime
    settings.peering.stealth = True
    settings.posting.level = logging.INFO
    settings.watching.server_timeout = 300
    settings.execution.max_workers = 8
    memo["kube"] = Kube.connect()


def _reconcile(
    memo: kopf.Memo, namespace: str | None, name: str, logger: kopf.Logger, kafka: bool = False
) -> None:
    assert namespace is not None, "StreamApp is namespaced"
    try:
        outcome = rec.reconcile(_kube(memo), namespace, name, _events, kafka=kafka and _options(memo).kafka)
    except Exception as exc:  # transient API trouble: kopf retries soon
        raise kopf.TemporaryError(f"reconcile failed: {exc}", delay=3) from exc
    if outcome is not None and (outcome.applied or outcome.pruned or outcome.error):
        logger.info(f"applied {outcome.applied}, pruned {outcome.pruned}, error {outcome.error}")


@kopf.on.resume(GROUP, VERSION, PLURAL)
@kopf.on.create(GROUP, VERSION, PLURAL)
@kopf.on.update(GROUP, VERSION, PLURAL)
def on_change(*, memo: kopf.Memo, namespace: str | None, name: str, logger: kopf.Logger, **_: Any) -> None:
    _reconcile(memo, namespace, name, logger)


@kopf.timer(GROUP, VERSION, PLURAL, interval=30.0, initial_delay=2.0, idle=None)
async def resync(*, memo: kopf.Memo, namespace: str | None, name: str, logger: kopf.Logger, **_: Any) -> None:
    """Undo drift (an object deleted or edited by hand) and refresh lag.

    Kafka work (control topic, lag) happens only here, so a slow or unreachable cluster never
    delays the handlers of spec changes and deletions. Async so that kopf can cancel it at once
    when the app is deleted (a sync timer would hold the finalizer until its thread returns).
    """
    await asyncio.to_thread(_reconcile, memo, namespace, name, logger, True)


def _owner(body: kopf.Body) -> str | None:
    for ref in body.get("metadata", {}).get("ownerReferences") or []:
        if ref.get("kind") == "StreamApp" and ref.get("apiVersion", "").startswith(f"{GROUP}/"):
            return str(ref["name"])
    return None


@kopf.on.event("apps", "v1", "statefulsets", labels={"app.kubernetes.io/managed-by": "baton-operator"})
def on_statefulset(*, memo: kopf.Memo, body: kopf.Body, namespace: str | None, type: str, **_: Any) -> None:
    owner = _owner(body)
    if owner is None or namespace is None:
        return
    if type == "DELETED":  # someone deleted it: recreate
        rec.reconcile(_kube(memo), namespace, owner, _events, kafka=False)
    else:
        rec.refresh_status(_kube(memo), namespace, owner, _events)


def _delete_topics_policy(*, spec: kopf.Spec, **_: Any) -> bool:
    return bool(spec.get("deletionPolicy") == "DeleteTopics")


@kopf.on.delete(GROUP, VERSION, PLURAL, when=_delete_topics_policy, retries=20, backoff=3)
def on_delete(*, memo: kopf.Memo, body: kopf.Body, **_: Any) -> None:
    try:
        rec.delete_topics(_kube(memo), dict(body), _events)
    except KafkaUnavailableError as exc:
        raise kopf.TemporaryError(f"cannot delete topics yet: {exc}", delay=5) from exc
