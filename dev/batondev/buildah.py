"""buildah with its storage under ``~/.cache/baton/buildah/`` (never the host's /var/lib/containers).

Why: images built for tests are caches like every other install of the stack: kept between
runs on one machine, shared by clones, and gone with the cache folder, without touching a
container setup the machine may have for other work.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from . import debtools, paths, requirements

ROOT = paths.CACHE / "buildah"


def argv(*args: str) -> list[str]:
    return [
        "buildah",
        "--root",
        str(ROOT / "storage"),
        "--runroot",
        str(ROOT / "run"),
        "--storage-driver",
        "overlay",
        *args,
    ]


def run(*args: str, log: str | None = None) -> str:
    """Run buildah; its stdout, or an error carrying the tail of its output."""
    debtools.ensure("buildah")
    return requirements.run(
        argv(*args), log=log, tail_lines=40, what=f"buildah {' '.join(args[:3])} ..."
    ).strip()


def exists(image: str) -> bool:
    debtools.ensure("buildah")
    return subprocess.run(argv("inspect", "--type", "image", image), capture_output=True).returncode == 0


def inspect(image: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(run("inspect", "--type", "image", image))
    return data
