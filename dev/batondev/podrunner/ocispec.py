"""A container's OCI runtime ``config.json``, from its Pod and its image (pure, unit tested).

Why: in the pod runner's OCI mode (``--runtime crun``) a Pod's container runs from its image
under a real OCI runtime, so what the kubelet would decide from the Pod must be decided
here: the process (command/args, else the image's ENTRYPOINT/CMD), the env (the Pod's,
resolved, over the image's ENV), the user (``runAsUser``/``runAsGroup``, else the image's
USER; ``fsGroup`` as a supplementary group), ``readOnlyRootFilesystem``, no new privileges
unless ``allowPrivilegeEscalation``, the capabilities after ``drop``/``add``, the volumes
bind-mounted at their mountPaths, a tmpfs at /tmp when no volume is mounted there, and the
host's network namespace (the runner's port remapping keeps working: the process listens on
the Pod's local ports, which the env and args already name).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# The capabilities container runtimes grant by default (containerd's and CRI-O's set).
DEFAULT_CAPS = (
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_MKNOD",
    "CAP_NET_RAW",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETFCAP",
    "CAP_SETPCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_SYS_CHROOT",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
)


class ImageConfigError(Exception):
    """The Pod and image together cannot be run (e.g. runAsNonRoot with a root user)."""


@dataclass(frozen=True)
class Image:
    """The parts of an image's config that decide how its containers run."""

    env: dict[str, str]
    entrypoint: list[str]
    cmd: list[str]
    user: str
    workdir: str
    passwd: str = ""  # the image's /etc/passwd, to resolve a USER given by name
    group: str = ""


@dataclass(frozen=True)
class Identity:
    uid: int
    gid: int
    extra_gids: list[int] = field(default_factory=list)


def argv(container: Mapping[str, Any], image: Image) -> list[str]:
    """The kubelet's rule: command replaces ENTRYPOINT (and drops CMD); args replace CMD."""
    command = list(container.get("command") or [])
    args = list(container.get("args") or [])
    if command:
        return command + args
    return image.entrypoint + (args or image.cmd)


def _lookup(table: str, name: str) -> tuple[int, int] | None:
    for line in table.splitlines():
        parts = line.split(":")
        if len(parts) >= 4 and parts[0] == name:
            return int(parts[2]), int(parts[3])
    return None


def identity(pod: Mapping[str, Any], container: Mapping[str, Any], image: Image) -> Identity:
    """The process's uid/gid/groups from the security contexts, falling back to the image's USER."""
    pod_ctx = pod["spec"].get("securityContext") or {}
    ctx = container.get("securityContext") or {}
    user, _, group = image.user.partition(":")
    image_uid, image_gid = 0, 0
    if user:
        if user.isdigit():
            image_uid = int(user)
            found = next((e for e in _entries(image.passwd) if e[2] == user), None)
            image_gid = int(found[3]) if found else 0
        else:
            looked = _lookup(image.passwd, user)
            if looked is None:
                raise ImageConfigError(f"image USER {user!r} is not in the image's /etc/passwd")
            image_uid, image_gid = looked
    if group:
        if group.isdigit():
            image_gid = int(group)
        else:
            looked = _lookup(image.group, group)
            if looked is None:
                raise ImageConfigError(f"image group {group!r} is not in the image's /etc/group")
            image_gid = looked[0]
    uid = ctx.get("runAsUser", pod_ctx.get("runAsUser", image_uid))
    gid = ctx.get("runAsGroup", pod_ctx.get("runAsGroup", image_gid))
    non_root = ctx.get("runAsNonRoot", pod_ctx.get("runAsNonRoot", False))
    if non_root and int(uid) == 0:
        raise ImageConfigError("container has runAsNonRoot and image will run as root")
    extra = [int(g) for g in pod_ctx.get("supplementalGroups") or []]
    if pod_ctx.get("fsGroup") is not None:
        extra.append(int(pod_ctx["fsGroup"]))
    return Identity(uid=int(uid), gid=int(gid), extra_gids=sorted(set(extra)))


def _entries(table: str) -> list[list[str]]:
    return [line.split(":") for line in table.splitlines() if line.count(":") >= 3]


def capabilities(container: Mapping[str, Any]) -> list[str]:
    """The default set minus ``drop`` (``ALL`` drops every one) plus ``add``."""
    caps = (container.get("securityContext") or {}).get("capabilities") or {}
    dropped = {_cap(c) for c in caps.get("drop") or []}
    kept = [] if "CAP_ALL" in dropped else [c for c in DEFAULT_CAPS if c not in dropped]
    for cap in caps.get("add") or []:
        if _cap(cap) not in kept:
            kept.append(_cap(cap))
    return kept


def _cap(name: str) -> str:
    name = str(name).upper()
    return name if name.startswith("CAP_") else f"CAP_{name}"


def env_list(image: Image, env: Mapping[str, str]) -> list[str]:
    """The Pod's env over the image's ENV, as ``KEY=VALUE`` strings."""
    return [f"{k}={v}" for k, v in {**image.env, **env}.items()]


def mounts(binds: Mapping[str, Path], read_only: set[str], files: Mapping[str, Path]) -> list[dict[str, Any]]:
    """The standard kernel filesystems, the Pod's volumes at their mountPaths, and a /tmp tmpfs
    when no volume is mounted there. ``files``: single files the runner provides (/etc/hosts)."""
    out: list[dict[str, Any]] = [
        {"destination": "/proc", "type": "proc", "source": "proc"},
        {
            "destination": "/dev",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "strictatime", "mode=755", "size=65536k"],
        },
        {
            "destination": "/dev/pts",
            "type": "devpts",
            "source": "devpts",
            "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"],
        },
        {
            "destination": "/dev/shm",
            "type": "tmpfs",
            "source": "shm",
            "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"],
        },
        {
            "destination": "/dev/mqueue",
            "type": "mqueue",
            "source": "mqueue",
            "options": ["nosuid", "noexec", "nodev"],
        },
        {
            "destination": "/sys",
            "type": "sysfs",
            "source": "sysfs",
            "options": ["nosuid", "noexec", "nodev", "ro"],
        },
    ]
    if not any(p.rstrip("/") == "/tmp" for p in binds):
        out.append(
            {
                "destination": "/tmp",
                "type": "tmpfs",
                "source": "tmpfs",
                "options": ["nosuid", "nodev", "mode=1777"],
            }
        )
    for dest, source in [*sorted(files.items()), *sorted(binds.items(), key=lambda kv: kv[0].count("/"))]:
        options = ["rbind", "rprivate", "ro" if dest in read_only or dest in files else "rw"]
        out.append({"destination": dest, "type": "bind", "source": str(source), "options": options})
    return out


def config(
    *,
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    image: Image,
    rootfs: Path,
    args: list[str],
    env: Mapping[str, str],
    binds: Mapping[str, Path],
    read_only_binds: set[str],
    files: Mapping[str, Path],
    hostname: str,
) -> dict[str, Any]:
    """The whole ``config.json`` for one start of ``container``."""
    ctx = container.get("securityContext") or {}
    who = identity(pod, container, image)
    caps = capabilities(container)
    return {
        "ociVersion": "1.0.2",
        "process": {
            "terminal": False,
            "user": {"uid": who.uid, "gid": who.gid, "additionalGids": who.extra_gids},
            "args": args,
            "env": env_list(image, env),
            "cwd": container.get("workingDir") or image.workdir or "/",
            "capabilities": {k: caps for k in ("bounding", "effective", "permitted")},
            # the kubelet's rule: allowPrivilegeEscalation: false sets no_new_privs
            "noNewPrivileges": ctx.get("allowPrivilegeEscalation") is False,
        },
        "root": {"path": str(rootfs), "readonly": bool(ctx.get("readOnlyRootFilesystem", False))},
        "hostname": hostname,
        "mounts": mounts(binds, read_only_binds, files),
        "linux": {
            # no network namespace: the host's, where the Pod's remapped local ports are
            "namespaces": [{"type": t} for t in ("pid", "ipc", "uts", "mount")],
            "maskedPaths": [
                "/proc/acpi",
                "/proc/kcore",
                "/proc/keys",
                "/proc/latency_stats",
                "/proc/timer_list",
                "/proc/timer_stats",
                "/proc/sched_debug",
                "/proc/scsi",
                "/sys/firmware",
            ],
            "readonlyPaths": [
                "/proc/asound",
                "/proc/bus",
                "/proc/fs",
                "/proc/irq",
                "/proc/sys",
                "/proc/sysrq-trigger",
            ],
        },
    }
