"""Where worker Pods read the compactor's snapshots from (issue 17): the same store the CronJob writes.

A task restoring from scratch loads the newest snapshot and replays only the changelog
after it (baton/worker/state/snapshot.py), so the workers must see the store the Job writes:

* ``spec.compaction.snapshotVolumeClaim``: the claim is mounted read-only at the same path
  as in the Job; it must be ``ReadWriteMany`` (or ``ReadOnlyMany`` for the workers) to be
  mounted by the Job and every worker at once.
* ``spec.compaction.snapshotStore`` as a local path (``/x``, ``file:///x``): passed as is;
  the path must exist in the worker image or a volume of the user's.
* ``s3a://bucket/prefix`` (or ``s3://``): passed as is, with ``spec.compaction.objectStore``
  as ``BATON_SNAPSHOT_S3_ENDPOINT``/``_REGION`` and its credentials Secret as
  ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY`` (secretKeyRef: the operator never reads the
  Secret). The CronJob gets the same variables (:func:`object_store_env`), so the Job and
  the workers address the same objects the same way;
* an HDFS URI: workers cannot read it (pyarrow's HDFS needs libhdfs), so they get nothing
  and restore from the changelog alone (the Job still writes snapshots there).

Only when compaction is enabled: a disabled compactor writes no new snapshots, and an old
one would be loaded with a long changelog tail after it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from baton.operator.core.compaction.cronjob import SNAPSHOT_MOUNT
from baton.operator.core.spec import StreamApp
from baton.worker.config import env_var
from baton.worker.state.snapshot_uri import S3_SCHEMES

VOLUME = "snapshots"


@dataclass(frozen=True)
class SnapshotSource:
    store: str  # BATON_SNAPSHOT_STORE
    claim: str | None = None  # a PVC to mount read-only at SNAPSHOT_MOUNT


def snapshot_source(app: StreamApp) -> SnapshotSource | None:
    compaction = app.spec.compaction
    if not compaction.enabled:
        return None
    if compaction.snapshot_store:
        if urlparse(compaction.snapshot_store).scheme in ("", "file", *S3_SCHEMES):
            return SnapshotSource(compaction.snapshot_store)
        return None
    if compaction.snapshot_volume_claim:
        return SnapshotSource(SNAPSHOT_MOUNT, compaction.snapshot_volume_claim)
    return None


def snapshot_volumes(app: StreamApp) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Pod volumes, container mounts) for the snapshot claim, if any."""
    source = snapshot_source(app)
    if source is None or source.claim is None:
        return [], []
    return (
        [{"name": VOLUME, "persistentVolumeClaim": {"claimName": source.claim, "readOnly": True}}],
        [{"name": VOLUME, "mountPath": SNAPSHOT_MOUNT, "readOnly": True}],
    )


def object_store_env(app: StreamApp) -> list[dict[str, Any]]:
    """Where the s3a:// store is and the credentials to it: for the workers and the CronJob alike."""
    store = app.spec.compaction.object_store
    if store is None:
        return []
    env: list[dict[str, Any]] = []
    if store.endpoint:
        env.append({"name": env_var("snapshot_s3_endpoint"), "value": store.endpoint})
    if store.region:
        env.append({"name": env_var("snapshot_s3_region"), "value": store.region})
    secret = store.credentials_secret
    if secret is not None:
        env += [
            {"name": var, "valueFrom": {"secretKeyRef": {"name": secret.name, "key": key}}}
            for var, key in (
                ("AWS_ACCESS_KEY_ID", secret.access_key_id_key),
                ("AWS_SECRET_ACCESS_KEY", secret.secret_access_key_key),
            )
        ]
    return env
