"""The worker container's environment: WorkerConfig's settings as BATON_* variables.

Names come from :func:`baton.worker.config.env_var` so they cannot drift from the worker;
a unit test builds a WorkerConfig from this very environment.
"""

from __future__ import annotations

import json
from typing import Any

from baton.control.messages import Color
from baton.operator.core.builders.kafka_access import SASL_PASSWORD_VAR, SASL_USERNAME_VAR, pod_access
from baton.operator.core.builders.rack import rack_env
from baton.operator.core.builders.snapshots import object_store_env, snapshot_source

__all__ = ["SASL_PASSWORD_VAR", "SASL_USERNAME_VAR", "kafka_client_env", "kafka_config", "worker_env"]

from baton.operator.core.constants import STATE_DIR
from baton.operator.core.spec import StreamApp
from baton.worker.config import env_var
from baton.worker.state.snapshot_uri import is_object_store


def _value(field: str, value: str) -> dict[str, Any]:
    return {"name": env_var(field), "value": value}


def kafka_config(app: StreamApp) -> dict[str, str]:
    """librdkafka settings: the user's extras plus security settings from spec.kafka."""
    return {**dict(sorted(app.spec.config.items())), **pod_access(app.spec.kafka).config}


def _credentials(app: StreamApp) -> list[dict[str, Any]]:
    """Env vars from the Secrets; they must precede BATON_KAFKA_CONFIG, because $(VAR)
    expands only earlier variables."""
    return pod_access(app.spec.kafka).env


def kafka_client_env(app: StreamApp) -> list[dict[str, Any]]:
    """What any Pod of the app needs to reach Kafka as the app does (the compactor's Job too)."""
    return [*_credentials(app), _value("kafka_config", _kafka_config_json(app))]


def _kafka_config_json(app: StreamApp) -> str:
    return json.dumps(kafka_config(app), sort_keys=True, separators=(",", ":"))


def worker_env(app: StreamApp, color: Color, generation: int = 0) -> list[dict[str, Any]]:
    """Environment of one color's worker container, in a stable order.

    The application id carries the color and, after a Rebuild, the generation; the control
    topic is always the base id's, so it is set explicitly rather than derived by the worker.
    """
    spec = app.spec
    env = _credentials(app)
    env += [
        _value("topology", spec.topology),
        _value("bootstrap_servers", spec.kafka.bootstrap_servers),
        _value("application_id", app.color_application_id(color, generation)),
        {"name": env_var("instance_id"), "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        # the pod: with processesPerPod > 1 each process has its own instance id, one host
        {"name": env_var("host"), "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        # spec.rack: the zone is the Node's label, which the worker reads at start
        *rack_env(app),
        # interactive queries: the pod's DNS name under the color's headless Service; each
        # process adds the port it serves on
        _value("application_server", f"$({env_var('host')}).{app.name}-{color}.{app.namespace}.svc"),
        _value("state_dir", STATE_DIR),
        _value("processing_guarantee", spec.processing_guarantee),
        _value("processes", str(spec.processes_per_pod)),
        _value("num_standby_replicas", str(spec.standby_replicas)),
        _value("acceptable_recovery_lag", str(spec.acceptable_recovery_lag)),
        _value("max_warmup_replicas", str(spec.max_warmup_replicas)),
        _value("probing_rebalance_interval_ms", str(spec.probing_rebalance_interval_ms)),
        _value("metrics_port", str(spec.worker.metrics_port)),
        _value("error_handler", spec.worker.error_handler),
        _value("store", spec.state.store),
        _value("write_cache", "true" if spec.worker.write_cache else "false"),
        _value("cache_max_bytes", str(spec.worker.cache_max_bytes)),
        _value("repartition_purge_interval_ms", str(spec.worker.repartition_purge_interval_ms)),
        _value("shutdown_grace_seconds", str(spec.worker.shutdown_grace_seconds)),
        _value("replication_factor", str(spec.kafka.replication_factor)),
        _value("kafka_config", _kafka_config_json(app)),
    ]
    if spec.upgrade.strategy == "BlueGreen":
        # Under Rolling there is one color and no flip: the worker always emits.
        env += [_value("color", color), _value("control_topic", app.control_topic)]
    if spec.commit_interval_ms is not None:
        env.append(_value("commit_interval_ms", str(spec.commit_interval_ms)))
    if spec.worker.log_level != "info":  # the worker's default: Pods of apps that keep it stay as they ran
        env.append(_value("log_level", spec.worker.log_level))
    snapshots = snapshot_source(app)
    if snapshots is not None:
        env.append(_value("snapshot_store", snapshots.store))
        if is_object_store(snapshots.store):
            env += object_store_env(app)
    return env + [dict(e) for e in spec.pod_template.env]
