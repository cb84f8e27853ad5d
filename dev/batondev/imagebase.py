"""Local stand-ins for the Dockerfile's two base images, made from Debian's packages.

Why: only package registries are reachable here, so ``python:3.11-slim-bookworm`` and
``maven:3.9-eclipse-temurin-17`` cannot be pulled. The stand-ins are what those images are
where it matters to the Dockerfile: Debian bookworm (debootstrap ``minbase``) with Debian's
Python 3.11 (``python``, ``python3`` in /usr/local/bin as in the official image, ``venv``
working, the Debian and security sources for ``apt-get``), and the same plus Maven and a JDK
17. Each is a local image named after a hash of its recipe, built once per machine; the
downloaded .debs stay in ``~/.cache/baton/debs-base/`` for the next cold build.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from . import buildah, debtools, paths

SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv", "ca-certificates")
MAVEN_PACKAGES = ("maven", "openjdk-17-jdk-headless")
DEBS = paths.CACHE / "debs-base"
HOST_SOURCES = Path("/etc/apt/sources.list.d/debian.sources")
ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
}
RECIPE_VERSION = 1  # bump when the steps below change in a way the inputs do not show


def _key(*parts: object) -> str:
    return hashlib.sha256(json.dumps([RECIPE_VERSION, *parts], sort_keys=True).encode()).hexdigest()[:12]


def sources() -> str:
    """The host's Debian sources (deb822), so the base's apt reaches the same archive and security."""
    if HOST_SOURCES.exists():
        return HOST_SOURCES.read_text()
    raise RuntimeError(f"{HOST_SOURCES} not found: the base image takes its Debian sources from the host")


def mirror() -> str:
    """The first Debian archive URI of the host's sources: debootstrap's mirror."""
    for uri in re.findall(r"^URIs:\s*(\S+)", sources(), re.MULTILINE):
        if not uri.rstrip("/").endswith("-security"):
            return str(uri)
    raise RuntimeError(f"no Debian archive URI in {HOST_SOURCES}")


def python_image() -> str:
    """The local stand-in of ``python:3.11-slim-bookworm``, built when missing; its name."""
    name = f"localhost/baton-base/python:3.11-{SUITE}-{_key(SUITE, PACKAGES, ENV, sources())}"
    if buildah.exists(name):
        return name
    debtools.ensure("debootstrap", "buildah")
    DEBS.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="baton-rootfs-", dir=paths.CACHE) as tmp:
        root = Path(tmp) / "rootfs"
        cmd = ["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}"]
        cmd += [f"--cache-dir={DEBS}", SUITE, str(root), mirror()]
        out = subprocess.run(cmd, capture_output=True, text=True)
        if out.returncode != 0:
            tail = "\n".join((out.stdout + out.stderr).splitlines()[-20:])
            raise RuntimeError(f"debootstrap failed ({out.returncode}):\n{tail}")
        _finish_rootfs(root)
        _import(root, name)
    return name


def _finish_rootfs(root: Path) -> None:
    """What the official image has on top of a plain Debian: python in /usr/local/bin, sources, no caches."""
    for link in ("python", "python3"):
        target = root / "usr/local/bin" / link
        target.unlink(missing_ok=True)
        target.symlink_to("/usr/bin/python3")
    (root / "etc/apt/sources.list").unlink(missing_ok=True)
    (root / "etc/apt/sources.list.d").mkdir(parents=True, exist_ok=True)
    (root / "etc/apt/sources.list.d/debian.sources").write_text(sources())
    for cache in ("var/lib/apt/lists", "var/cache/apt/archives"):
        for item in (root / cache).glob("*"):
            if item.is_file():
                item.unlink()


def _import(root: Path, name: str) -> None:
    """The rootfs as a one-layer image: buildah from scratch, copy it in, commit."""
    ctr = buildah.run("from", "scratch")
    try:
        mount = buildah.run("mount", ctr)
        subprocess.run(["cp", "-a", f"{root}/.", mount], check=True)
        buildah.run("umount", ctr)
        config = [f"--env={k}={v}" for k, v in ENV.items()]
        buildah.run("config", *config, "--cmd", "python3", "--os", "linux", "--arch", "amd64", ctr)
        buildah.run("commit", "-q", ctr, name)
    finally:
        subprocess.run(buildah.argv("rm", ctr), capture_output=True)


def maven_image() -> str:
    """The local stand-in of ``maven:3.9-eclipse-temurin-17``: the Python base + Debian's Maven and JDK 17."""
    base = python_image()
    name = f"localhost/baton-base/maven:jdk17-{SUITE}-{_key(base, MAVEN_PACKAGES)}"
    if buildah.exists(name):
        return name
    apt_cache = paths.CACHE / "debs-maven"
    apt_cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="baton-maven-") as tmp:
        (Path(tmp) / "Containerfile").write_text(
            f"FROM {base}\n"
            "RUN apt-get update && apt-get install -y --no-install-recommends "
            f"{' '.join(MAVEN_PACKAGES)} && rm -rf /var/lib/apt/lists/*\n"
        )
        buildah.run(
            "bud",
            "--isolation",
            "chroot",
            "--pull-never",
            "-v",
            f"{apt_cache}:/var/cache/apt/archives",
            "-t",
            name,
            tmp,
            log=str(paths.CACHE / "image-build.log"),
        )
    shutil.rmtree(Path(tmp), ignore_errors=True)
    return name
