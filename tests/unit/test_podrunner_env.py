"""The pod runner's env resolution: the kubelet's order, references and $(VAR) expansion."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from batondev.podrunner.envresolve import (
    ConfigError,
    NodeResources,
    expand,
    expand_all,
    field_value,
    parse_quantity,
    resolve_env,
)

pytestmark = pytest.mark.unit

POD: dict[str, Any] = {
    "metadata": {
        "name": "app-0",
        "namespace": "ns1",
        "uid": "u-1",
        "labels": {"team": "analytics", "a.b/c": "x"},
        "annotations": {"note": "hi"},
    },
    "spec": {"nodeName": "baton-local", "serviceAccountName": "app", "containers": []},
}

DATA: dict[tuple[str, str], dict[str, str]] = {
    ("Secret", "kafka"): {"username": "alice", "password": "s3cret"},
    ("ConfigMap", "settings"): {"LEVEL": "debug", "bad key": "skipped", "MODE": "fast"},
}


def lookup(kind: str, namespace: str, name: str) -> Mapping[str, str] | None:
    assert namespace == "ns1"
    return DATA.get((kind, name))


def test_expansion_rules() -> None:
    env = {"A": "1", "B": "two"}
    assert expand("$(A)-$(B)", env) == "1-two"
    assert expand("$(MISSING)", env) == "$(MISSING)"
    assert expand("$$(A)", env) == "$(A)"
    assert expand("cost $5 $(A", env) == "cost $5 $(A"
    assert expand_all(["--x=$(A)", "$(B)"], env) == ["--x=1", "two"]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("metadata.name", "app-0"),
        ("metadata.namespace", "ns1"),
        ("metadata.uid", "u-1"),
        ("metadata.labels['team']", "analytics"),
        ("metadata.labels['a.b/c']", "x"),
        ("metadata.annotations['note']", "hi"),
        ("metadata.labels['absent']", ""),
        ("status.podIP", "127.0.0.1"),
        ("status.hostIP", "127.0.0.1"),
        ("spec.nodeName", "baton-local"),
        ("spec.serviceAccountName", "app"),
    ],
)
def test_field_refs(path: str, value: str) -> None:
    assert field_value(POD, path) == value


def test_unknown_field_ref_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        field_value(POD, "status.phase")


def test_order_references_and_expansion() -> None:
    container = {
        "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
        "env": [
            {"name": "USER", "valueFrom": {"secretKeyRef": {"name": "kafka", "key": "username"}}},
            {"name": "PASS", "valueFrom": {"secretKeyRef": {"name": "kafka", "key": "password"}}},
            {"name": "CONF", "value": '{"u":"$(USER)","p":"$(PASS)","later":"$(LATER)"}'},
            {"name": "LATER", "value": "x"},
            {"name": "ME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "CFG_MODE", "value": "overridden $(CFG_LEVEL)"},
        ],
    }
    env = resolve_env(POD, container, lookup)
    assert env["CONF"] == '{"u":"alice","p":"s3cret","later":"$(LATER)"}'  # only earlier names expand
    assert env["ME"] == "app-0"
    assert env["CFG_LEVEL"] == "debug"
    assert env["CFG_MODE"] == "overridden debug"
    assert "CFG_bad key" not in env
    assert list(env)[:2] == ["CFG_LEVEL", "CFG_MODE"]  # envFrom first


def test_missing_references() -> None:
    missing = {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k"}}}]}
    with pytest.raises(ConfigError, match="nope"):
        resolve_env(POD, missing, lookup)
    missing_key = {"env": [{"name": "X", "valueFrom": {"secretKeyRef": {"name": "kafka", "key": "k"}}}]}
    with pytest.raises(ConfigError, match="no key"):
        resolve_env(POD, missing_key, lookup)
    optional = {
        "env": [
            {"name": "X", "valueFrom": {"secretKeyRef": {"name": "nope", "key": "k", "optional": True}}},
            {
                "name": "Y",
                "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "k", "optional": True}},
            },
        ],
        "envFrom": [{"secretRef": {"name": "nope", "optional": True}}],
    }
    assert resolve_env(POD, optional, lookup) == {}


def test_resource_field_refs() -> None:
    container = {
        "name": "w",
        "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
        "env": [
            {
                "name": "CPU_REQ",
                "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1m"}},
            },
            {"name": "CPU_LIM", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {
                "name": "MEM_MI",
                "valueFrom": {"resourceFieldRef": {"resource": "limits.memory", "divisor": "1Mi"}},
            },
            {"name": "MEM_REQ", "valueFrom": {"resourceFieldRef": {"resource": "requests.memory"}}},
        ],
    }
    env = resolve_env(POD, container, lookup, NodeResources(cpu="4", memory="8Gi"))
    assert env == {"CPU_REQ": "250", "CPU_LIM": "4", "MEM_MI": "1024", "MEM_REQ": str(512 * 2**20)}


def test_quantities() -> None:
    assert parse_quantity("250m") * 4 == 1
    assert parse_quantity("1Gi") == 2**30
    assert parse_quantity("1e3") == 1000
    assert parse_quantity("1.5k") == 1500
    with pytest.raises(ValueError):
        parse_quantity("12XB")
