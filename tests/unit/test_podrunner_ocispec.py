"""The OCI mode's config.json decisions (pure): what the kubelet would decide from the Pod."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from batondev.podrunner import ocispec

pytestmark = pytest.mark.unit

IMAGE = ocispec.Image(
    env={"PATH": "/opt/baton/bin:/usr/bin", "HOME": "/tmp", "PYTHONPATH": "/app"},
    entrypoint=["baton"],
    cmd=["--help"],
    user="10001:10001",
    workdir="/app",
    passwd="root:x:0:0::/root:/bin/sh\nbaton:x:10001:10001::/nonexistent:/usr/sbin/nologin\n",
    group="root:x:0:\nbaton:x:10001:\n",
)


def _pod(**ctx: Any) -> dict[str, Any]:
    return {"spec": {"securityContext": ctx}}


def test_command_and_args_follow_the_kubelet_rules() -> None:
    assert ocispec.argv({}, IMAGE) == ["baton", "--help"]
    assert ocispec.argv({"args": ["run", "x:y"]}, IMAGE) == ["baton", "run", "x:y"]
    assert ocispec.argv({"command": ["sh"]}, IMAGE) == ["sh"]  # command drops CMD too
    assert ocispec.argv({"command": ["sh"], "args": ["-c", "id"]}, IMAGE) == ["sh", "-c", "id"]


def test_user_from_security_context_else_the_image() -> None:
    assert ocispec.identity(_pod(), {}, IMAGE) == ocispec.Identity(10001, 10001, [])
    pod = _pod(runAsUser=2000, runAsGroup=3000, fsGroup=4000, supplementalGroups=[5])
    assert ocispec.identity(pod, {}, IMAGE) == ocispec.Identity(2000, 3000, [5, 4000])
    ctx = {"securityContext": {"runAsUser": 7}}
    assert ocispec.identity(pod, ctx, IMAGE).uid == 7  # the container's context wins
    named = ocispec.Image(**{**IMAGE.__dict__, "user": "baton"})
    assert ocispec.identity(_pod(), {}, named) == ocispec.Identity(10001, 10001, [])


def test_run_as_non_root_refuses_a_root_user() -> None:
    root = ocispec.Image(**{**IMAGE.__dict__, "user": ""})
    with pytest.raises(ocispec.ImageConfigError, match="runAsNonRoot"):
        ocispec.identity(_pod(runAsNonRoot=True), {}, root)
    assert ocispec.identity(_pod(runAsNonRoot=True, runAsUser=10001), {}, root).uid == 10001


def test_capabilities_drop_all_and_add() -> None:
    assert ocispec.capabilities({"securityContext": {"capabilities": {"drop": ["ALL"]}}}) == []
    some = ocispec.capabilities(
        {"securityContext": {"capabilities": {"drop": ["NET_RAW"], "add": ["SYS_TIME"]}}}
    )
    assert "CAP_NET_RAW" not in some and "CAP_CHOWN" in some and some[-1] == "CAP_SYS_TIME"
    assert ocispec.capabilities({}) == list(ocispec.DEFAULT_CAPS)


def test_config_of_a_restricted_worker() -> None:
    container = {
        "name": "worker",
        "command": ["baton", "run", "examples.click_counter:topology"],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
    }
    pod = _pod(runAsNonRoot=True, runAsUser=10001, runAsGroup=10001, fsGroup=10001)
    config = ocispec.config(
        pod=pod,
        container=container,
        image=IMAGE,
        rootfs=Path("/images/x/rootfs"),
        args=ocispec.argv(container, IMAGE),
        env={"HOME": "/home/override", "BATON_METRICS_PORT": "41234"},
        binds={"/var/lib/baton": Path("/run/pvc/state"), "/tmp": Path("/run/pod/tmp")},
        read_only_binds=set(),
        files={"/etc/hosts": Path("/run/pod/hosts")},
        hostname="app-0",
    )
    process = config["process"]
    assert process["user"] == {"uid": 10001, "gid": 10001, "additionalGids": [10001]}
    assert process["noNewPrivileges"] is True and process["capabilities"]["bounding"] == []
    assert config["root"] == {"path": "/images/x/rootfs", "readonly": True}
    env = dict(e.split("=", 1) for e in process["env"])
    assert env["HOME"] == "/home/override" and env["PYTHONPATH"] == "/app"  # the Pod's over the image's
    assert process["cwd"] == "/app"
    binds = {m["destination"]: m for m in config["mounts"] if m["type"] == "bind"}
    assert (
        binds["/var/lib/baton"]["source"] == "/run/pvc/state" and "rw" in binds["/var/lib/baton"]["options"]
    )
    assert "ro" in binds["/etc/hosts"]["options"]
    assert not any(m["destination"] == "/tmp" and m["type"] == "tmpfs" for m in config["mounts"])
    assert "network" not in {n["type"] for n in config["linux"]["namespaces"]}  # the host's ports


def test_a_tmpfs_at_tmp_when_no_volume_is_there() -> None:
    mounts = ocispec.mounts({}, set(), {})
    assert any(m["destination"] == "/tmp" and m["type"] == "tmpfs" for m in mounts)
