"""The pod runner's OCI mode: containers from their images under runc or crun (``--runtime runc``).

Why: process mode runs ``baton`` from the project's virtualenv and never touches the image,
so a missing file, a wrong entrypoint or a write under ``readOnlyRootFilesystem`` would only
show on a real cluster. Here each container runs from its image's root filesystem (a mounted
buildah working container per image id, ``batondev.image.rootfs``, shared read-only; a
container that may write its root gets an overlay of its own) with ``ocispec``'s config.json. ``<runtime> run``
stays in the foreground, so the Pod's thread watches it like any process; signals go through
``<runtime> kill`` (SIGTERM, then SIGKILL after the grace period) to the container's process.
runc and crun take the same commands; runc is the default because crun 1.8 (bookworm's)
refuses a hybrid cgroup layout with a controller in the v2 hierarchy, which these machines have.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from batondev.podrunner import ocispec, process


class ImageMissing(Exception):
    """The Pod's image is not in the local image store (the kubelet's ErrImageNeverPull)."""


@dataclass(frozen=True)
class OciLaunch:
    """One start of a container: its id, bundle and config, and where its rootfs comes from."""

    cid: str
    bundle: Path
    config: dict[str, Any]
    lower: Path  # the image's shared rootfs
    overlay: bool  # the root is writable: an overlay of its own over ``lower``


class OciRuntime:
    """runc (or crun) with its state under the runner's folder, and the images it has unpacked."""

    def __init__(self, state: Path, binary: str = "runc") -> None:
        self.state = state
        self.binary = binary
        self._images: dict[str, tuple[Path, ocispec.Image]] = {}
        self._lock = threading.Lock()

    def argv(self, *args: str) -> list[str]:
        return [self.binary, "--root", str(self.state), *args]

    def image(self, name: str) -> tuple[Path, ocispec.Image]:
        """``name``'s rootfs and config, unpacked on first use (one Pod at a time unpacks)."""
        from batondev import buildah
        from batondev import image as images

        with self._lock:
            if name not in self._images:
                if not buildah.exists(name):
                    raise ImageMissing(f'image "{name}" is not in the local image store (dev/image build)')
                unpacked = images.rootfs(name)
                etc = unpacked.rootfs / "etc"
                self._images[name] = (
                    unpacked.rootfs,
                    ocispec.Image(
                        env=unpacked.env,
                        entrypoint=unpacked.entrypoint,
                        cmd=unpacked.cmd,
                        user=unpacked.user,
                        workdir=unpacked.workdir,
                        passwd=_read(etc / "passwd"),
                        group=_read(etc / "group"),
                    ),
                )
            return self._images[name]

    def start(self, launch: OciLaunch, *, env: dict[str, str], log: Path, banner: str) -> OciProcess:
        """``run`` in the foreground, stdout and stderr appended to ``log``."""
        self.delete(launch.cid)  # a container of that id left by an earlier start
        launch.bundle.mkdir(parents=True, exist_ok=True)
        root = launch.lower
        if launch.overlay:
            root = _mount_overlay(launch.bundle, launch.lower)
        config = {**launch.config, "root": {**launch.config["root"], "path": str(root)}}
        (launch.bundle / "config.json").write_text(json.dumps(config, indent=1))
        own_env = {"PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")}
        if process.NODE_ENV in env:  # so a later runner finds and ends what this one left
            own_env[process.NODE_ENV] = env[process.NODE_ENV]
        started = process.start(
            self.argv("run", "--bundle", str(launch.bundle), launch.cid),
            env=own_env,
            cwd=launch.bundle,
            log=log,
            banner=banner,
        )
        return OciProcess(popen=started.popen, started=started.started, runtime=self, launch=launch)

    def kill(self, cid: str, sig: int) -> bool:
        done = subprocess.run(self.argv("kill", cid, str(sig)), capture_output=True)
        return done.returncode == 0

    def delete(self, cid: str) -> None:
        subprocess.run(self.argv("delete", "--force", cid), capture_output=True)

    def exec_argv(self, cid: str, command: list[str]) -> list[str]:
        """An ``exec`` probe's command, run inside the container."""
        return self.argv("exec", cid, *command)


@dataclass
class OciProcess(process.Process):
    """A foreground ``run``: signals reach the container's process through the runtime's ``kill``."""

    runtime: OciRuntime | None = None
    launch: OciLaunch | None = None
    cleaned: bool = False

    def signal(self, sig: int) -> None:
        assert self.runtime is not None and self.launch is not None
        if not self.runtime.kill(self.launch.cid, sig):
            super().signal(sig)  # not created yet, or already gone: the runtime's own process

    def stop(self, grace: float) -> int:
        code = super().stop(grace)
        self.cleanup()
        return code

    def poll(self) -> int | None:
        code = super().poll()
        if code is not None:
            self.cleanup()
        return code

    def cleanup(self) -> None:
        assert self.runtime is not None and self.launch is not None
        if self.cleaned:
            return
        self.cleaned = True
        self.runtime.delete(self.launch.cid)
        if self.launch.overlay:
            _unmount(self.launch.bundle / "rootfs")


def _read(path: Path) -> str:
    with contextlib.suppress(OSError):
        return path.read_text()
    return ""


def _mount_overlay(bundle: Path, lower: Path) -> Path:
    """A writable root of this container's own: the image's rootfs below, an upper dir in the bundle."""
    merged, upper, work = bundle / "rootfs", bundle / "upper", bundle / "work"
    _unmount(merged)
    for d in (upper, work):
        shutil.rmtree(d, ignore_errors=True)
    for d in (merged, upper, work):
        d.mkdir(parents=True, exist_ok=True)
    options = f"lowerdir={lower},upperdir={upper},workdir={work}"
    subprocess.run(["mount", "-t", "overlay", "overlay", "-o", options, str(merged)], check=True)
    return merged


def _unmount(path: Path) -> None:
    for _ in range(3):
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            return
        time.sleep(0.05)
