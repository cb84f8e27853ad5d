"""Checks for the host tools the stack builds with, failing with the install step."""

from __future__ import annotations

import shutil
import subprocess

INSTALL_HINTS = {
    "java": "install a Java 17+ runtime, e.g. `apt-get install -y openjdk-17-jdk-headless`",
    "mvn": "install Apache Maven, e.g. `apt-get install -y maven`",
    "go": "install Go 1.25+ from your distribution or go.dev, and put `go` on PATH",
    "python3": "install Python 3.11+",
}


class MissingTool(RuntimeError):
    """A host tool the stack needs is absent; the message says how to install it."""


def need(tool: str) -> str:
    """Return the path of ``tool`` or raise with the install step."""
    path = shutil.which(tool)
    if path is None:
        hint = INSTALL_HINTS.get(tool, f"install {tool}")
        raise MissingTool(f"`{tool}` is not on PATH; it is needed to set up the local stack: {hint}")
    return path


def run(
    cmd: list[str],
    *,
    cwd: str | None = None,
    env: dict[str, str] | None = None,
    log: str | None = None,
    tail_lines: int = 30,
    what: str | None = None,
) -> str:
    """Run a build step and return its stdout; on failure raise with the tail of its output so
    the cause is visible (``what`` names the step in the error, the whole command by default)."""
    need(cmd[0])
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    if log:
        with open(log, "a") as fh:
            fh.write(f"$ {' '.join(cmd)}\n{out.stdout}\n{out.stderr}\n")
    if out.returncode != 0:
        tail = "\n".join((out.stdout + out.stderr).splitlines()[-tail_lines:])
        head = (
            f"{what} failed ({out.returncode}):"
            if what
            else f"command failed ({out.returncode}): {' '.join(cmd)}"
        )
        raise RuntimeError(f"{head}\n{tail}")
    return out.stdout
