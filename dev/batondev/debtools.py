"""Host tools from Debian's packages (buildah, runc or crun, debootstrap, iptables, the CNI
plugins, conntrack), their .debs cached.

Why: a fresh CI machine has none of them, and the image build and the node need them. ``apt-get`` downloads into ``~/.cache/baton/debs-tools/`` instead of its own archive
(which Debian's container images empty after every install), so a machine that keeps the
cache installs from the local files without downloading them again.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from . import paths
from .requirements import MissingTool

DEBS = paths.CACHE / "debs-tools"
# command -> the Debian package that provides it
PACKAGES = {
    "buildah": "buildah",
    "crun": "crun",
    "runc": "runc",
    "debootstrap": "debootstrap",
    "iptables": "iptables",
}


def _apt(args: list[str]) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    return subprocess.run(["apt-get", *args], capture_output=True, text=True, env=env)


def ensure(*commands: str) -> None:
    """Install the Debian packages of ``commands`` that are missing, or raise naming them."""
    missing = [c for c in commands if shutil.which(c) is None]
    if not missing:
        return
    packages = sorted({PACKAGES[c] for c in missing})
    hint = f"`apt-get install -y --no-install-recommends {' '.join(packages)}` (Debian bookworm packages)"
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise MissingTool(f"{', '.join(missing)} not on PATH and cannot be installed here: {hint}")
    DEBS.mkdir(parents=True, exist_ok=True)
    install = ["install", "-y", "--no-install-recommends", f"-o=Dir::Cache::Archives={DEBS}", *packages]
    out = _apt(install)
    if out.returncode != 0:  # no package lists yet (a fresh machine): update once, try again
        _apt(["update", "-q"])
        out = _apt(install)
    if out.returncode != 0 or any(shutil.which(c) is None for c in missing):
        tail = "\n".join((out.stdout + out.stderr).splitlines()[-15:])
        raise MissingTool(f"{', '.join(missing)}: installing {' '.join(packages)} failed; {hint}\n{tail}")


def ensure_packages(*packages: str) -> None:
    """Install Debian ``packages`` that are not installed (those that provide no command of that name)."""
    status = subprocess.run(
        ["dpkg-query", "-W", "-f=${Package} ${Status}\\n", *packages], capture_output=True, text=True
    )
    installed = {
        line.split()[0] for line in status.stdout.splitlines() if line.endswith("install ok installed")
    }
    missing = [p for p in packages if p not in installed]
    if not missing:
        return
    hint = f"`apt-get install -y --no-install-recommends {' '.join(missing)}` (Debian bookworm packages)"
    if shutil.which("apt-get") is None or os.geteuid() != 0:
        raise MissingTool(
            f"Debian packages {', '.join(missing)} are missing and cannot be installed here: {hint}"
        )
    DEBS.mkdir(parents=True, exist_ok=True)
    install = ["install", "-y", "--no-install-recommends", f"-o=Dir::Cache::Archives={DEBS}", *missing]
    out = _apt(install)
    if out.returncode != 0:
        _apt(["update", "-q"])
        out = _apt(install)
    if out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).splitlines()[-15:])
        raise MissingTool(f"installing {' '.join(missing)} failed; {hint}\n{tail}")


def download(package: str) -> Path:
    """``package``'s .deb in the cache (``apt-get download``, not installed): for files an image needs."""
    DEBS.mkdir(parents=True, exist_ok=True)
    found = sorted(DEBS.glob(f"{package}_*.deb"))
    if not found:
        if shutil.which("apt-get") is None:
            raise MissingTool(f"apt-get is needed to download the Debian package {package}")
        out = subprocess.run(["apt-get", "download", package], cwd=DEBS, capture_output=True, text=True)
        if out.returncode != 0:  # no package lists yet (a fresh machine)
            _apt(["update", "-q"])
            out = subprocess.run(["apt-get", "download", package], cwd=DEBS, capture_output=True, text=True)
        found = sorted(DEBS.glob(f"{package}_*.deb"))
        if not found:
            raise MissingTool(f"apt-get download {package} failed: {out.stderr.strip()[-500:]}")
    return found[-1]
