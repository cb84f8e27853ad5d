"""``dev/image build|load|lock|jre-version``: build the Dockerfile's targets here, cached by their inputs.

Why: the image is what a cluster runs, and tests should run it. ``build`` makes the local
bases (``imagebase``), then ``buildah bud --isolation chroot --layers`` builds ``runtime``
and ``compactor`` from the repo's own Dockerfile with ``--build-arg PYTHON_IMAGE/MAVEN_IMAGE``
pointing at them. Each target is tagged ``localhost/baton[-compactor]:<key>``, the key a hash
of every input (the Dockerfile, the lockfiles, pyproject, baton/, examples/ and the bases),
so an unchanged tree builds nothing and a changed one rebuilds only the layers it touched.
The Maven stages resolve through ``~/.cache/baton/m2`` (mounted at build time only), the jars
the stack already resolved for pyspark.

``load`` imports them into the node's containerd (``dev/stack up node``), where Pods run them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import click

from . import buildah, imagebase, imagelock, paths
from .requirements import MissingTool

TARGETS = {"runtime": "localhost/baton", "compactor": "localhost/baton-compactor"}
INPUTS = ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "requirements", "baton", "examples")
LOG = paths.CACHE / "image-build.log"
TRUST = "/run/baton-host-trust"  # where builds see the host's CA bundle (see trust_mounts)


def inputs_key(bases: tuple[str, ...]) -> str:
    """A hash of every file the Dockerfile reads and of the bases' names (themselves hashes)."""
    digest = hashlib.sha256("\n".join(bases).encode())
    for top in INPUTS:
        path = paths.REPO / top
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and "__pycache__" not in f.parts:
                digest.update(str(f.relative_to(paths.REPO)).encode() + b"\0" + f.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def build(target: str) -> str:
    """The image of ``target`` for this tree, built when missing; its name."""
    bases = (imagebase.python_image(), imagebase.maven_image())
    name = f"{TARGETS[target]}:{inputs_key(bases)}"
    if buildah.exists(name):
        return name
    m2 = paths.CACHE / "m2"
    m2.mkdir(parents=True, exist_ok=True)
    volumes = [f"{m2}:/root/.m2/repository", *trust_mounts()]
    buildah.run(
        "bud",
        "--isolation",
        "chroot",
        "--layers",
        "--pull-never",
        "--target",
        target,
        "--build-arg",
        f"PYTHON_IMAGE={bases[0]}",
        "--build-arg",
        f"MAVEN_IMAGE={bases[1]}",
        *(arg for v in volumes for arg in ("-v", v)),
        "-f",
        str(paths.REPO / "Dockerfile"),
        "-t",
        name,
        str(paths.REPO),
        log=str(LOG),
    )
    prune_images(keep=name)
    return name


def trust_mounts() -> list[str]:
    """Build-time mounts that make pip and Maven trust what the host trusts.

    Why: where the registries are reached through a TLS-inspecting proxy, the host has its CA
    and the bases do not. The host's bundle (and Java keystore) are mounted at a path of their
    own with a pip.conf and an /etc/mavenrc pointing at them: RUN steps see them, no layer
    keeps them, and the Dockerfile stays what a user builds anywhere else.
    """
    conf = paths.CACHE / "image-trust"
    conf.mkdir(parents=True, exist_ok=True)
    mounts: list[str] = []
    bundle = Path(os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt")
    if bundle.is_file():
        (conf / "pip.conf").write_text(f"[global]\ncert = {TRUST}/ca.crt\n")
        mounts += [f"{bundle.resolve()}:{TRUST}/ca.crt:ro", f"{conf / 'pip.conf'}:/etc/pip.conf:ro"]
    keystore = Path("/etc/ssl/certs/java/cacerts")
    if keystore.is_file():
        (conf / "mavenrc").write_text(
            f'MAVEN_OPTS="$MAVEN_OPTS -Djavax.net.ssl.trustStore={TRUST}/cacerts"\n'
        )
        mounts += [f"{keystore.resolve()}:{TRUST}/cacerts:ro", f"{conf / 'mavenrc'}:/etc/mavenrc:ro"]
    return mounts


def prune_images(keep: str, newest: int = 3, min_age_seconds: float = 86400.0) -> list[str]:
    """Untag the builds of each target beyond the ``newest`` few images that are over a day old;
    buildah's layer cache stays.

    Why: each tree builds images of its own key, and old ones would pile up in the cache. A
    day's grace, because another clone's test session may be using an older key right now;
    and by image, not by name, since an unchanged target gets a second name on the same image.
    """
    removed: list[str] = []
    listed = json.loads(buildah.run("images", "--json"))
    for repo in TARGETS.values():
        images = sorted(
            (
                (str(img.get("createdatraw") or ""), int(img.get("created") or 0), img)
                for img in listed
                if any(n.startswith(f"{repo}:") for n in img.get("names") or [])
            ),
            key=lambda item: item[0],
            reverse=True,
        )
        for _, created, img in images[newest:]:
            names = [n for n in img.get("names") or [] if n.startswith(f"{repo}:")]
            if keep in names or time.time() - created < min_age_seconds:
                continue
            for name in names:
                subprocess.run(buildah.argv("rmi", name), capture_output=True)
                removed.append(name)
    return removed


@click.group()
def main() -> None:
    """Build Baton's images from the Dockerfile with buildah (dev and test tooling)."""


@main.command("build")
@click.argument("targets", nargs=-1, type=click.Choice(sorted(TARGETS)))
def build_cmd(targets: tuple[str, ...]) -> None:
    """Build TARGETS (default: runtime and compactor); print their names."""
    started = time.monotonic()
    try:
        for target in targets or ("runtime", "compactor"):
            click.echo(build(target))
    except (MissingTool, RuntimeError) as exc:
        click.echo(f"error: {exc}\n(full log: {LOG})", err=True)
        sys.exit(1)
    click.echo(f"images ready in {time.monotonic() - started:.1f}s", err=True)


@main.command("load")
@click.argument("targets", nargs=-1, type=click.Choice(sorted(TARGETS)))
def load_cmd(targets: tuple[str, ...]) -> None:
    """Build TARGETS (default: runtime and compactor) and import them into the node's containerd
    (`dev/stack up node`), where Pods can run them; print their names."""
    from . import node

    try:
        for target in targets or ("runtime", "compactor"):
            name = build(target)
            node.load_image(name)
            click.echo(name)
    except (MissingTool, RuntimeError) as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@main.command("lock")
def lock_cmd() -> None:
    """Regenerate requirements/image.lock and requirements/compactor.lock (needs the package index)."""
    imagelock.lock()
    for lock in (imagelock.IMAGE_LOCK, imagelock.COMPACTOR_LOCK):
        click.echo(f"{lock.relative_to(paths.REPO)}: {len(imagelock.pins(lock.read_text()))} pins")


@main.command("jre-version")
def jre_version_cmd() -> None:
    """Print the openjdk-17-jre-headless version the base's apt installs today (the Dockerfile's JRE_VERSION)."""
    ctr = buildah.run("from", "--pull-never", imagebase.python_image())
    try:
        script = "apt-get update -qq >/dev/null && apt-cache policy openjdk-17-jre-headless"
        policy = buildah.run("run", "--isolation", "chroot", ctr, "--", "sh", "-c", script)
    finally:
        subprocess.run(buildah.argv("rm", ctr), capture_output=True)
    candidate = re.search(r"Candidate:\s*(\S+)", policy)
    if candidate is None:
        click.echo(f"error: no candidate in:\n{policy}", err=True)
        sys.exit(1)
    click.echo(candidate.group(1))


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    main()
