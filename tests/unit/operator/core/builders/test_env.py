"""The worker Pods' environment is exactly WorkerConfig's settings, and it parses."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.env import worker_env
from baton.operator.core.builders.statefulset import statefulset
from baton.operator.core.compaction.cronjob import SNAPSHOT_MOUNT, cronjob
from baton.operator.core.constants import STATE_DIR
from baton.operator.core.spec import StreamApp
from baton.worker.config import ProcessingGuarantee, WorkerConfig, env_var
from tests.support.samples import app, example_body

pytestmark = pytest.mark.unit

ALL_FIELDS = set(WorkerConfig.model_fields)


def _baton_names(env: list[dict[str, Any]]) -> set[str]:
    return {e["name"] for e in env if e["name"].startswith("BATON_")}


def _resolve(
    env: list[dict[str, Any]], pod: str, secret: dict[str, str], node: str = "node-a"
) -> dict[str, str]:
    """What the kubelet does: fieldRef, secretKeyRef, and $(VAR) expansion of earlier variables."""
    out: dict[str, str] = {}
    fields = {"metadata.name": pod, "spec.nodeName": node}
    for e in env:
        if "value" in e:
            out[e["name"]] = re.sub(
                r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", lambda m: out.get(m.group(1), m.group(0)), e["value"]
            )
        elif e["valueFrom"].get("fieldRef", {}).get("fieldPath") in fields:
            out[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        else:
            out[e["name"]] = secret[e["valueFrom"]["secretKeyRef"]["key"]]
    return out


def test_every_baton_variable_is_a_worker_setting() -> None:
    for sample in (app(), app(upgrade={"strategy": "Rolling"}), app(commitIntervalMs=None)):
        for color in sample.colors:
            names = _baton_names(worker_env(sample, color))
            assert names <= {env_var(f) for f in ALL_FIELDS}


# Worker settings the StreamApp spec does not expose yet: the Pods run with the worker's default.
# Adding a WorkerConfig field makes the next test fail until it is mapped here or in the spec.
NOT_IN_SPEC_YET = {
    "state_cleanup_delay_ms",  # Kafka Streams' state.cleanup.delay.ms; its default suits Pods
    "log_level",  # --log-level; a StreamApp field for it is part of the platform team's issue (47)
}
# A Pod's zone is its Node's label, which the downward API does not give: under spec.rack the
# operator passes the Node's name and the label, and the worker reads the zone itself.
ONLY_WITH_RACK = {"node_name", "zone_node_label"}
ZONE_FROM_THE_NODE = {"zone"}
# For people running `baton run` by hand: the operator passes every Kafka setting in
# BATON_KAFKA_CONFIG (Secrets as $(VAR) references and mounted files), never a file of its own.
FOR_PEOPLE = {"kafka_config_file"}
# Set only when spec.compaction is on (test_workers_read_the_snapshots_the_compactor_writes).
ONLY_WITH_COMPACTION = {"snapshot_store", "snapshot_s3_endpoint", "snapshot_s3_region"}


def test_blue_green_sets_every_worker_setting() -> None:
    """No worker setting is silently left to its default under the operator."""
    names = _baton_names(worker_env(app(), "green"))
    missing = (
        {f for f in ALL_FIELDS if env_var(f) not in names}
        - NOT_IN_SPEC_YET
        - ONLY_WITH_COMPACTION
        - ONLY_WITH_RACK
        - ZONE_FROM_THE_NODE
        - FOR_PEOPLE
    )
    assert missing == set(), f"WorkerConfig fields the operator does not set: {sorted(missing)}"
    assert not _baton_names(worker_env(app(), "green")) & {env_var(f) for f in ONLY_WITH_RACK}


def test_rack_makes_the_worker_read_its_nodes_label(monkeypatch: pytest.MonkeyPatch) -> None:
    """spec.rack: the Node's name from the downward API and the label to read, which parse into
    a WorkerConfig that looks its zone up (baton/worker/zone.py); the zone itself is not set."""
    sample = app(rack={"topologyKey": "example.com/rack"})
    env = worker_env(sample, "blue")
    assert {"name": "BATON_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in env
    assert {"name": "BATON_ZONE_NODE_LABEL", "value": "example.com/rack"} in env
    assert "BATON_ZONE" not in _baton_names(env)
    for name in list(__import__("os").environ):
        if name.startswith("BATON_"):
            monkeypatch.delenv(name)
    for name, value in _resolve(env, "click-counter-blue-0", {}, node="node-7").items():
        monkeypatch.setenv(name, value)
    cfg = WorkerConfig()  # type: ignore[call-arg]
    assert (cfg.node_name, cfg.zone_node_label, cfg.zone) == ("node-7", "example.com/rack", None)
    default = worker_env(app(rack={}), "blue")
    assert {"name": "BATON_ZONE_NODE_LABEL", "value": "topology.kubernetes.io/zone"} in default


def test_workers_read_the_snapshots_the_compactor_writes() -> None:
    """The Pods get the store the CronJob writes: the claim mounted read-only where the Job
    mounts it, or a local path as is; an HDFS URI workers cannot read is left out."""
    claim = statefulset(app(compaction={"enabled": True, "snapshotVolumeClaim": "snaps"}), "green")
    pod = claim["spec"]["template"]["spec"]
    env = {e["name"]: e.get("value") for e in pod["containers"][0]["env"]}
    assert env[env_var("snapshot_store")] == SNAPSHOT_MOUNT
    assert {"name": "snapshots", "persistentVolumeClaim": {"claimName": "snaps", "readOnly": True}} in pod[
        "volumes"
    ]
    assert {"name": "snapshots", "mountPath": SNAPSHOT_MOUNT, "readOnly": True} in pod["containers"][0][
        "volumeMounts"
    ]
    job = cronjob(
        {
            **example_body(),
            "spec": {
                **example_body()["spec"],
                "compaction": {"enabled": True, "snapshotVolumeClaim": "snaps"},
            },
        }
    )
    assert job is not None
    job_pod = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job_pod["containers"][0]["args"][2] == SNAPSHOT_MOUNT
    assert any(v.get("persistentVolumeClaim", {}).get("claimName") == "snaps" for v in job_pod["volumes"])

    local = worker_env(app(compaction={"enabled": True, "snapshotStore": "file:///shared/snaps"}), "blue")
    assert {"name": env_var("snapshot_store"), "value": "file:///shared/snaps"} in local
    for spec in (
        {"enabled": True, "snapshotStore": "hdfs://namenode/snaps"},
        {"enabled": False, "snapshotVolumeClaim": "x"},
        {"enabled": False, "snapshotStore": "s3a://bucket/snaps"},
    ):
        names = _baton_names(worker_env(app(compaction=spec), "blue"))
        assert env_var("snapshot_store") not in names, spec


def test_workers_and_the_job_reach_an_object_store_the_same_way() -> None:
    """An s3a:// store: the same URI, endpoint, region and Secret-backed keys in the worker
    Pods and the CronJob's Pod; without objectStore, only the URI (AWS, the Pods' identity)."""
    compaction = {
        "enabled": True,
        "snapshotStore": "s3a://snaps/prod",
        "objectStore": {
            "endpoint": "http://minio.storage:9000",
            "region": "eu-west-1",
            "credentialsSecret": {"name": "s3-keys", "accessKeyIdKey": "id"},
        },
    }
    objects = {f"{o['kind']}/{o['metadata']['name']}": o for o in desired_objects(app(compaction=compaction))}
    job = objects["CronJob/click-counter-compactor"]["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    for pod in (job, objects["StatefulSet/click-counter-green"]["spec"]["template"]["spec"]):
        env = {e["name"]: e.get("value") or e.get("valueFrom") for e in pod["containers"][0]["env"]}
        assert env[env_var("snapshot_s3_endpoint")] == "http://minio.storage:9000"
        assert env[env_var("snapshot_s3_region")] == "eu-west-1"
        assert env["AWS_ACCESS_KEY_ID"] == {"secretKeyRef": {"name": "s3-keys", "key": "id"}}
        assert env["AWS_SECRET_ACCESS_KEY"] == {
            "secretKeyRef": {"name": "s3-keys", "key": "AWS_SECRET_ACCESS_KEY"}
        }
    assert job["containers"][0]["args"][2] == "s3a://snaps/prod"
    workers = objects["StatefulSet/click-counter-blue"]["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in workers["env"]}
    assert env[env_var("snapshot_store")] == "s3a://snaps/prod"
    config = WorkerConfig.model_validate(  # what the worker makes of it
        {"topology": "t", "bootstrap_servers": "k:9092", "application_id": "a"}
        | {f: env[env_var(f)] for f in ("snapshot_store", "snapshot_s3_endpoint", "snapshot_s3_region")}
    )
    assert config.snapshot_s3_endpoint == "http://minio.storage:9000"
    plain = worker_env(app(compaction={"enabled": True, "snapshotStore": "s3a://snaps/prod"}), "blue")
    assert {"name": env_var("snapshot_store"), "value": "s3a://snaps/prod"} in plain
    assert not {e["name"] for e in plain} & {"AWS_ACCESS_KEY_ID", env_var("snapshot_s3_endpoint")}


def test_worker_config_refuses_stores_it_cannot_read() -> None:
    base = {"topology": "t", "bootstrap_servers": "k:9092", "application_id": "a"}
    for bad, why in (
        ({"snapshot_store": "hdfs://nn/x"}, "hdfs:// is written by the compactor only"),
        ({"snapshot_store": "s3a:///x"}, "names no bucket"),
        ({"snapshot_s3_endpoint": "minio:9000"}, "must be an http:// or https:// URL"),
    ):
        with pytest.raises(ValueError, match=why):
            WorkerConfig.model_validate(base | bad)


def test_worker_config_parses_the_pod_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    sample = app(
        standbyReplicas=2,
        acceptableRecoveryLag=500,
        maxWarmupReplicas=3,
        probingRebalanceIntervalMs=60_000,
        processingGuarantee="at_least_once",
        config={"fetch.min.bytes": "1"},
    )
    env = _resolve(worker_env(sample, "green"), "click-counter-green-2", {})
    for name in list(__import__("os").environ):
        if name.startswith("BATON_"):
            monkeypatch.delenv(name)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    cfg = WorkerConfig()  # type: ignore[call-arg]
    assert cfg.application_id == "click-counter-green"
    assert cfg.instance_id == "click-counter-green-2"
    assert cfg.color == "green"
    assert cfg.control_topic == "click-counter-control"
    assert cfg.num_standby_replicas == 2
    assert cfg.acceptable_recovery_lag == 500
    assert cfg.max_warmup_replicas == 3
    assert cfg.probing_rebalance_interval_ms == 60_000
    assert cfg.processing_guarantee is ProcessingGuarantee.AT_LEAST_ONCE
    assert cfg.commit_interval_ms == 100
    assert str(cfg.state_dir) == STATE_DIR
    assert cfg.topology == "examples.click_counter:topology"
    assert cfg.kafka_config == {"fetch.min.bytes": "1", "security.protocol": "plaintext"}
    assert cfg.metrics_port == 8080


# StreamApp spec fields that are worker settings under another name (Kafka Streams' names).
SPEC_TO_WORKER = {
    "standby_replicas": "num_standby_replicas",
    "acceptable_recovery_lag": "acceptable_recovery_lag",
    "max_warmup_replicas": "max_warmup_replicas",
    "probing_rebalance_interval_ms": "probing_rebalance_interval_ms",
}


@pytest.mark.parametrize(("spec_field", "worker_field"), sorted(SPEC_TO_WORKER.items()))
def test_assignor_settings_default_as_in_the_worker(spec_field: str, worker_field: str) -> None:
    """An app that leaves them out runs the worker's defaults, and the Pods say so explicitly."""
    body = example_body()
    body["spec"] = {k: body["spec"][k] for k in ("image", "topology", "kafka")}
    bare = StreamApp.from_body(body)
    default = WorkerConfig.model_fields[worker_field].default
    assert getattr(bare.spec, spec_field) == default
    env = {e["name"]: e.get("value") for e in worker_env(bare, "blue")}
    assert env[env_var(worker_field)] == str(default)


def test_state_dir_is_the_workers_default_and_the_mount() -> None:
    """The volume is mounted where the worker looks even without the variable."""
    assert str(WorkerConfig.model_fields["state_dir"].default) == STATE_DIR
    container = statefulset(app(), "blue")["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "state", "mountPath": STATE_DIR} in container["volumeMounts"]


def test_rolling_runs_one_color_without_flip_gating() -> None:
    sample = app(upgrade={"strategy": "Rolling"})
    assert sample.colors == ("blue",)
    names = _baton_names(worker_env(sample, "blue"))
    assert env_var("color") not in names and env_var("control_topic") not in names


def test_sasl_credentials_come_from_the_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    sample = app(
        kafka={
            "bootstrapServers": "k:9093",
            "securityProtocol": "SASL_SSL",
            "saslMechanism": "SCRAM-SHA-256",
            "secretRef": {"name": "kafka-creds"},
        }
    )
    env = worker_env(sample, "blue")
    names = [e["name"] for e in env]
    # $(VAR) expands only variables defined earlier in the list.
    assert names.index("KAFKA_SASL_PASSWORD") < names.index(env_var("kafka_config"))
    secret_refs = {
        e["valueFrom"]["secretKeyRef"]["name"] for e in env if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert secret_refs == {"kafka-creds"}
    assert "s3cr3t" not in json.dumps(env)
    resolved = _resolve(env, "p-0", {"username": "alice", "password": "s3cr3t"})
    config = json.loads(resolved[env_var("kafka_config")])
    assert config["sasl.username"] == "alice" and config["sasl.password"] == "s3cr3t"
    assert config["sasl.mechanism"] == "SCRAM-SHA-256"
    assert config["security.protocol"] == "sasl_ssl"
    assert config["ssl.ca.location"] == "/etc/baton/kafka/ca.crt"


def test_user_env_is_appended_after_the_operators() -> None:
    sample = app(podTemplate={"env": [{"name": "TZ", "value": "UTC"}]})
    env = worker_env(sample, "blue")
    assert env[-1] == {"name": "TZ", "value": "UTC"}
