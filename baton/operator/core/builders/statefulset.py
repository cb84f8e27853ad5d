"""One color's StatefulSet: the worker Pods, their state volumes and their security settings.

The Pod passes Pod Security "restricted": non-root, no privilege escalation, all
capabilities dropped, RuntimeDefault seccomp, and a read-only root filesystem (the state
volume and an emptyDir /tmp are the only writable paths).
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from baton.control.messages import Color
from baton.images import container_security_context, pod_security_context
from baton.operator.core.builders.common import (
    color_name,
    metadata,
    selector_labels,
    service_account_name,
)
from baton.operator.core.builders.env import worker_env
from baton.operator.core.builders.kafka_access import pod_access
from baton.operator.core.builders.rack import api_access
from baton.operator.core.builders.snapshots import snapshot_volumes
from baton.operator.core.constants import (
    ANNOTATION_RESTART_NONCE,
    ANNOTATION_SPEC_HASH,
    CONTAINER_NAME,
    METRICS_PORT_NAME,
    STATE_DIR,
)
from baton.operator.core.spec import (
    MetadataTemplate,
    PlacementSpec,
    ProbeSpec,
    ProbesSpec,
    StreamApp,
    StreamAppSpec,
)

STATE_VOLUME = "state"


# Fields that change how many Pods run or how the operator behaves, not what a Pod runs: a
# change to them is not a deploy (scaling applies to both colors at once).
NOT_DEPLOYED = frozenset({"replicas", "paused", "upgrade", "compaction", "deletion_policy", "autoscaling"})


# Fields added after the first release, hashed only when they differ from their defaults: an
# operator upgrade then leaves the revision of an app that does not use them as it was (a new
# revision is a blue-green deploy of every such app), and their defaults render what it ran.
HASHED_WHEN_SET: dict[str, Any] = {"rack": None, "placement": PlacementSpec()}


# The same for nested fields (by their wire path), at the values that render what ran before.
NESTED_HASHED_WHEN_SET: dict[tuple[str, ...], Any] = {
    ("restartNonce",): None,
    ("worker", "logLevel"): "info",
    ("podTemplate", "securityContext"): {},
    ("podTemplate", "containerSecurityContext"): {},
    ("podTemplate", "probes"): ProbesSpec().model_dump(mode="json", by_alias=True),
    ("podTemplate", "statefulSet"): MetadataTemplate().model_dump(mode="json", by_alias=True),
    ("podTemplate", "persistentVolumeClaim"): MetadataTemplate().model_dump(mode="json", by_alias=True),
}


def spec_hash(spec: StreamAppSpec) -> str:
    """A short hash of what a color's Pods run: status shows which spec each color has."""
    exclude = set(NOT_DEPLOYED) | {f for f, default in HASHED_WHEN_SET.items() if getattr(spec, f) == default}
    dumped = spec.model_dump(mode="json", by_alias=True, exclude=exclude)
    for path, default in NESTED_HASHED_WHEN_SET.items():
        *parents, leaf = path
        holder = dumped
        for key in parents:
            holder = holder.get(key) or {}
        if leaf in holder and holder[leaf] == default:
            del holder[leaf]
    raw = json.dumps(dumped, sort_keys=True)
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def placement_affinity(app: StreamApp, color: Color) -> dict[str, Any] | None:
    """Pod anti-affinity between the Pods of one color per ``spec.placement`` (None: none).

    Preferred (the default, per node): the scheduler spreads a color's Pods over nodes (or
    zones) when it can, so losing one loses few tasks at once, and still runs them all when
    there are fewer nodes than Pods. Required: at most one Pod of a color per node (zone); a
    Pod with no such domain left stays Pending. The colors do not repel each other: the idle
    color may share nodes with the active one.
    """
    placement = app.spec.placement
    term = {
        "topologyKey": placement.topology_key,
        "labelSelector": {"matchLabels": selector_labels(app, color)},
    }
    if placement.anti_affinity == "None":
        return None
    if placement.anti_affinity == "Required":
        return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return {
        "podAntiAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": term}]
        }
    }


def _probe(path: str, period: int, failures: int, tuning: ProbeSpec | None = None) -> dict[str, Any]:
    """What the probe checks is the operator's; its timing may be tuned (``podTemplate.probes``)."""
    probe: dict[str, Any] = {
        "httpGet": {"path": path, "port": METRICS_PORT_NAME},
        "periodSeconds": period,
        "timeoutSeconds": 2,
        "failureThreshold": failures,
    }
    if tuning is not None:
        probe.update(tuning.model_dump(by_alias=True, exclude_none=True))
    return probe


def _volumes(app: StreamApp) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(Pod volumes, container mounts). A rocksdb state volume comes from the claim template."""
    spec = app.spec
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {}}]
    mounts: list[dict[str, Any]] = [
        {"name": STATE_VOLUME, "mountPath": STATE_DIR},
        {"name": "tmp", "mountPath": "/tmp"},
    ]
    if spec.state.store == "memory":
        volumes.append({"name": STATE_VOLUME, "emptyDir": {}})
    tls_volumes, tls_mounts = kafka_secret_volumes(app)
    more_volumes, more_mounts = snapshot_volumes(app)
    api_volumes, api_mounts = api_access(app)
    return (
        volumes + tls_volumes + more_volumes + api_volumes,
        mounts + tls_mounts + more_mounts + api_mounts,
    )


def kafka_secret_volumes(app: StreamApp) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Secrets' certificates and keys, where ``ssl.*.location`` point, for any Pod of the app."""
    access = pod_access(app.spec.kafka)
    return access.volumes, access.mounts


def _own_container(container: dict[str, Any]) -> dict[str, Any]:
    """A sidecar or init container of ``podTemplate``, with the worker's securityContext under
    its own: Pod Security "restricted" refuses a Pod if any container leaves it out."""
    return {
        **container,
        "securityContext": {**container_security_context(), **(container.get("securityContext") or {})},
    }


def pod_template(app: StreamApp, color: Color, generation: int = 0) -> dict[str, Any]:
    spec = app.spec
    tpl = spec.pod_template
    volumes, mounts = _volumes(app)
    container: dict[str, Any] = {
        "name": CONTAINER_NAME,
        "image": spec.image,
        "imagePullPolicy": spec.image_pull_policy,
        "command": ["baton", "run", spec.topology],
        "env": worker_env(app, color, generation),
        "ports": [{"name": METRICS_PORT_NAME, "containerPort": spec.worker.metrics_port, "protocol": "TCP"}],
        # Readiness reflects restore state and lag (the worker's /readyz), so a Pod restoring
        # its tasks is not Ready and a deploy waits for it; liveness only catches a hung process.
        "readinessProbe": _probe("/readyz", period=5, failures=2, tuning=tpl.probes.readiness),
        "livenessProbe": _probe("/healthz", period=10, failures=6, tuning=tpl.probes.liveness),
        # a user's fields over the restricted defaults (fsGroup, runAsUser, seccompProfile, ...)
        "securityContext": {**container_security_context(), **tpl.container_security_context},
        "volumeMounts": mounts,
    }
    if tpl.probes.startup is not None:  # a slow start (a big restore) without a lax liveness probe
        container["startupProbe"] = _probe("/healthz", period=10, failures=30, tuning=tpl.probes.startup)
    if spec.resources is not None:
        container["resources"] = spec.resources.model_dump(exclude_none=True)
    if tpl.env_from:
        container["envFrom"] = [dict(e) for e in tpl.env_from]
    container["volumeMounts"] = mounts + [dict(m) for m in tpl.volume_mounts]
    pod_spec: dict[str, Any] = {
        "serviceAccountName": service_account_name(app),
        # Workers talk to the Kubernetes API only to read their Node's zone (spec.rack), with the
        # token of their own projected volume (builders/rack.py); no other Pod gets one.
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": spec.worker.shutdown_grace_seconds + 10,
        "securityContext": {**pod_security_context(), **tpl.security_context},
        "containers": [container, *(_own_container(c) for c in tpl.sidecars)],
        "volumes": volumes + [dict(v) for v in tpl.volumes],
    }
    if tpl.init_containers:
        pod_spec["initContainers"] = [_own_container(c) for c in tpl.init_containers]
    if tpl.topology_spread_constraints:
        pod_spec["topologySpreadConstraints"] = [
            {"labelSelector": {"matchLabels": selector_labels(app, color)}, **c}
            for c in tpl.topology_spread_constraints
        ]
    # spec.podTemplate.affinity replaces what spec.placement builds (the CRD refuses both at once)
    affinity = tpl.affinity if tpl.affinity is not None else placement_affinity(app, color)
    if affinity is not None:
        pod_spec["affinity"] = affinity
    if tpl.node_selector:
        pod_spec["nodeSelector"] = dict(tpl.node_selector)
    if tpl.tolerations:
        pod_spec["tolerations"] = [dict(t) for t in tpl.tolerations]
    if tpl.priority_class_name:
        pod_spec["priorityClassName"] = tpl.priority_class_name
    if tpl.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": s.name} for s in tpl.image_pull_secrets]
    labels = {**tpl.labels, **metadata(app, "", color)["labels"]}
    meta: dict[str, Any] = {"labels": labels}
    annotations = dict(tpl.annotations)
    if spec.restart_nonce is not None:
        annotations[ANNOTATION_RESTART_NONCE] = spec.restart_nonce
    if annotations:  # the API server drops an empty map; leave it out to compare equal
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": pod_spec}


def volume_claim_templates(app: StreamApp) -> list[dict[str, Any]]:
    state = app.spec.state
    if state.store == "memory":
        return []
    claim_spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": state.size}},
    }
    if state.storage_class_name:
        claim_spec["storageClassName"] = state.storage_class_name
    extra = app.spec.pod_template.persistent_volume_claim
    meta: dict[str, Any] = {"name": STATE_VOLUME}
    if extra.labels:
        meta["labels"] = dict(extra.labels)
    if extra.annotations:
        meta["annotations"] = dict(extra.annotations)
    return [{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta, "spec": claim_spec}]


def statefulset(
    app: StreamApp, color: Color, replicas: int | None = None, generation: int = 0
) -> dict[str, Any]:
    """One color's StatefulSet, running ``app.spec`` (the spec revision the deploy machine gave
    this color) under application id generation ``generation``.

    Under upgrade.strategy Rolling the StatefulSet controller must not restart Pods on its own
    (it would not wait for restored state): OnDelete, and the operator deletes one Pod at a
    time once the previous one is Ready again. Under BlueGreen only the idle color is ever
    updated, so the controller's own rolling update is fine.
    """
    spec = app.spec
    meta = metadata(app, color_name(app, color), color)
    extra = spec.pod_template.stateful_set
    meta["labels"] = {**extra.labels, **meta["labels"]}  # the operator's own labels win
    meta["annotations"] = {**extra.annotations, ANNOTATION_SPEC_HASH: spec_hash(spec)}
    delete_state = "Delete" if spec.deletion_policy == "DeleteTopics" else "Retain"
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {
            "serviceName": color_name(app, color),
            "replicas": spec.replicas if replicas is None else replicas,
            "selector": {"matchLabels": selector_labels(app, color)},
            # Workers share nothing at start-up: start and stop them all at once.
            "podManagementPolicy": "Parallel",
            "updateStrategy": (
                {"type": "OnDelete"}
                if spec.upgrade.strategy == "Rolling"
                else {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
            ),
            "revisionHistoryLimit": 5,
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": delete_state, "whenScaled": "Retain"},
            "template": pod_template(app, color, generation),
            "volumeClaimTemplates": volume_claim_templates(app),
        },
    }
