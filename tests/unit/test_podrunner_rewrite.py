"""The pod runner's rewriting of mount paths and container ports, and its volume layout."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from batondev.podrunner import portmap
from batondev.podrunner.rewrite import rewrite_arg_ports, rewrite_env_ports, rewrite_paths
from batondev.podrunner.volumes import Layout, claim_names, mounts, volume_dirs

pytestmark = pytest.mark.unit

MOUNTS = {
    "/var/lib/baton": Path("/L/state"),
    "/var/lib/baton/cache": Path("/L/cache"),
    "/tmp": Path("/L/tmp"),
}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("/var/lib/baton", "/L/state"),
        ("/var/lib/baton/", "/L/state/"),
        ("/var/lib/baton/x/y", "/L/state/x/y"),
        ("/var/lib/baton/cache/k", "/L/cache/k"),  # the longest mount wins
        ("--state-dir=/var/lib/baton", "--state-dir=/L/state"),
        ('{"ssl.ca.location":"/tmp/ca.crt"}', '{"ssl.ca.location":"/L/tmp/ca.crt"}'),
        ("a:/tmp:b", "a:/L/tmp:b"),
        ("/var/lib/baton2", "/var/lib/baton2"),
        ("/opt/var/lib/baton", "/opt/var/lib/baton"),
        ("/tmpfile", "/tmpfile"),
        ("relative/tmp", "relative/tmp"),
        ("8080", "8080"),
    ],
)
def test_paths(value: str, expected: str) -> None:
    assert rewrite_paths(value, MOUNTS) == expected


def test_no_mounts_no_change() -> None:
    assert rewrite_paths("/var/lib/baton", {}) == "/var/lib/baton"


def test_env_ports() -> None:
    env = {"BATON_METRICS_PORT": "8080", "PORT": "9090", "OTHER": "8080", "port": "8080", "X_PORT": "1234"}
    assert rewrite_env_ports(env, {8080: 41000, 9090: 42000}) == {
        "BATON_METRICS_PORT": "41000",
        "PORT": "42000",
        "OTHER": "8080",  # not named *PORT: left alone
        "port": "41000",
        "X_PORT": "1234",  # not a container port
    }


def test_arg_ports() -> None:
    args = ["serve", "--metrics-port=8080", "--port", "9090", "--workers", "8080", "-p", "8080", "--port=1"]
    assert rewrite_arg_ports(args, {8080: 41000, 9090: 42000}) == [
        "serve",
        "--metrics-port=41000",
        "--port",
        "42000",
        "--workers",
        "8080",
        "-p",
        "8080",
        "--port=1",
    ]


POD: dict[str, Any] = {
    "metadata": {"name": "app-0", "namespace": "ns1", "annotations": {portmap.ANNOTATION: '{"8080": 40001}'}},
    "spec": {
        "containers": [
            {
                "name": "w",
                "ports": [
                    {"name": "metrics", "containerPort": 8080},
                    {"containerPort": 9000, "hostPort": 19000},
                ],
                "volumeMounts": [
                    {"name": "state", "mountPath": "/var/lib/baton"},
                    {"name": "tmp", "mountPath": "/tmp"},
                    {"name": "conf", "mountPath": "/etc/app/conf.yaml", "subPath": "conf.yaml"},
                ],
            },
            {"name": "side", "ports": [{"containerPort": 7000}]},
        ],
        "volumes": [
            {"name": "state", "persistentVolumeClaim": {"claimName": "state-app-0"}},
            {"name": "tmp", "emptyDir": {}},
            {"name": "conf", "configMap": {"name": "c"}},
            {"name": "host", "hostPath": {"path": "/srv/x"}},
        ],
    },
}


def test_volume_layout() -> None:
    layout = Layout(Path("/R"))
    dirs = volume_dirs(POD, layout)
    assert dirs == {
        "state": Path("/R/ns1/pvc/state-app-0"),
        "tmp": Path("/R/ns1/app-0/volumes/tmp"),
        "conf": Path("/R/ns1/app-0/volumes/conf"),
        "host": Path("/srv/x"),
    }
    assert claim_names(POD) == ["state-app-0"]
    assert mounts(POD["spec"]["containers"][0], dirs) == {
        "/var/lib/baton": Path("/R/ns1/pvc/state-app-0"),
        "/tmp": Path("/R/ns1/app-0/volumes/tmp"),
        "/etc/app/conf.yaml": Path("/R/ns1/app-0/volumes/conf/conf.yaml"),
    }
    assert layout.log_file("ns1", "app-0", "w") == Path("/R/ns1/app-0/w.log")


def test_port_plan_keeps_previous_and_host_ports() -> None:
    fresh = iter([50000, 50001])
    mapping = portmap.plan(POD, lambda: next(fresh), portmap.decode(POD))
    assert mapping == {8080: 40001, 9000: 19000, 7000: 50000}
    assert portmap.resolve("metrics", POD, mapping) == 40001
    assert portmap.resolve(7000, POD, mapping) == 50000
    assert portmap.resolve("7000", POD, mapping) == 50000
    assert (
        portmap.decode({"metadata": {"annotations": {portmap.ANNOTATION: portmap.encode(mapping)}}})
        == mapping
    )


def test_allocator_never_hands_out_a_held_port_twice() -> None:
    allocator = portmap.Allocator()
    ports = {allocator.free_port() for _ in range(20)}
    assert len(ports) == 20
    allocator.release(list(ports))
