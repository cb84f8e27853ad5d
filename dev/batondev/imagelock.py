"""The image's hashed lockfiles (``requirements/*.lock``): made by uv, checked against pyproject.

Why: ``pip install .`` in the Dockerfile resolved whatever was newest on the day of the
build, so two builds of one commit could differ. The Dockerfile now installs exactly the
lockfiles with ``--require-hashes`` and then the project with ``--no-deps``.

Two files, both universal (every platform's hashes, for multi-arch builds):

* ``image.lock``: the dependencies, the ``[operator]`` extra and the build backend
  (pyproject's ``build-system.requires``, so ``--no-build-isolation`` needs no download);
* ``compactor.lock``: the same plus the ``[compactor]`` extra (pyspark), resolved first;
  ``image.lock`` is constrained by it, so shared packages have one version in both images.

Each file starts with ``# inputs: <hash>``, the hash of the pyproject lists it was made from:
``in_sync`` (a unit test) compares it, and every pin against the specifiers, without a network.
``dev/image lock`` regenerates both with uv (installed into ``~/.cache/baton/uv-<version>/``).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from . import paths

UV_VERSION = "0.13.9"
LOCKS = paths.REPO / "requirements"
IMAGE_LOCK = LOCKS / "image.lock"
COMPACTOR_LOCK = LOCKS / "compactor.lock"
EXTRAS = {IMAGE_LOCK.name: ("operator",), COMPACTOR_LOCK.name: ("operator", "compactor")}
_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==([^\s\\;]+)", re.MULTILINE)
_INPUTS = re.compile(r"^# inputs: ([0-9a-f]{64})$", re.MULTILINE)


def _project(pyproject: Path) -> dict[str, Any]:
    return tomllib.loads(pyproject.read_text())


def requirements(lock: Path, pyproject: Path = paths.REPO / "pyproject.toml") -> list[str]:
    """The requirement strings ``lock`` must satisfy: dependencies, its extras, the build backend."""
    data = _project(pyproject)
    project = data["project"]
    out = list(project["dependencies"])
    for extra in EXTRAS[lock.name]:
        out += project["optional-dependencies"][extra]
    return out + list(data["build-system"]["requires"])


def inputs_hash(lock: Path, pyproject: Path = paths.REPO / "pyproject.toml") -> str:
    return hashlib.sha256(json.dumps(sorted(requirements(lock, pyproject))).encode()).hexdigest()


def pins(text: str) -> dict[str, str]:
    """Canonical name -> pinned version in a lockfile's text."""
    return {canonicalize_name(name): version for name, version in _PIN.findall(text)}


def in_sync(lock: Path, pyproject: Path = paths.REPO / "pyproject.toml") -> list[str]:
    """What is wrong with ``lock`` for this pyproject (empty when it is in sync)."""
    if not lock.exists():
        return [f"{lock.name} is missing: run dev/image lock"]
    text = lock.read_text()
    problems: list[str] = []
    recorded = _INPUTS.search(text)
    if recorded is None or recorded.group(1) != inputs_hash(lock, pyproject):
        problems.append(f"{lock.name} was made from other pyproject dependencies: run dev/image lock")
    pinned = pins(text)
    for raw in requirements(lock, pyproject):
        req = Requirement(raw)
        if req.marker is not None and not req.marker.evaluate({"python_version": "3.11"}):
            continue
        version = pinned.get(canonicalize_name(req.name))
        if version is None:
            problems.append(f"{lock.name} does not pin {req.name}")
        elif not req.specifier.contains(version, prereleases=True):
            problems.append(f"{lock.name} pins {req.name}=={version}, outside {req.specifier}")
    for line in text.splitlines():
        if _PIN.match(line) and not line.rstrip().endswith("\\"):
            problems.append(f"{lock.name}: {line.strip()} has no hashes")
    return problems


def uv() -> Path:
    """uv at UV_VERSION in a venv of its own under the cache (never the project's venv)."""
    home = paths.tool_dir("uv", UV_VERSION)
    exe = home / "bin" / "uv"
    if not exe.exists():
        subprocess.run([sys.executable, "-m", "venv", str(home)], check=True)
        subprocess.run([str(home / "bin" / "pip"), "install", "-q", f"uv=={UV_VERSION}"], check=True)
    return exe


def _compile(lock: Path, constraints: Path | None) -> None:
    with tempfile.TemporaryDirectory(prefix="baton-lock-") as tmp:
        source = Path(tmp) / "requirements.in"
        source.write_text("\n".join(requirements(lock)) + "\n")
        out = Path(tmp) / lock.name
        cmd = [str(uv()), "pip", "compile", str(source), "--generate-hashes", "--universal"]
        cmd += ["--python-version", "3.11", "--no-header", "--annotation-style", "line", "-q", "-o", str(out)]
        if constraints is not None:
            cmd += ["-c", str(constraints)]
        subprocess.run(cmd, check=True, cwd=tmp)
        body = (
            out.read_text().replace(str(source), "pyproject.toml").replace(str(constraints), "compactor.lock")
        )
    header = (
        f"# The image's Python dependencies, every file hashed: made by `dev/image lock` (uv {UV_VERSION}).\n"
        f"# From pyproject.toml: dependencies + {' + '.join(f'[{e}]' for e in EXTRAS[lock.name])} + build-system.requires.\n"
        f"# inputs: {inputs_hash(lock)}\n"
    )
    lock.write_text(header + body)


def lock() -> None:
    """Regenerate both lockfiles (the compactor's first: it constrains the runtime's)."""
    LOCKS.mkdir(exist_ok=True)
    _compile(COMPACTOR_LOCK, None)
    _compile(IMAGE_LOCK, COMPACTOR_LOCK)
