"""A release's version, read from every file that states it, and a tag checked against it.

``.github/workflows/release.yaml`` runs ``python -m batondev.release v0.2.0`` (with ``dev`` on
PYTHONPATH and PyYAML installed) before it builds anything: the tag must be ``v`` followed by
the version that pyproject.toml, charts/baton/Chart.yaml (``version`` and ``appVersion``) and
``baton.__version__`` (which names the operator's default compactor image) all state. On a
mismatch it exits 1 and says which file says what. The unit tests read the same files
through this module, so the check and the tests share one reader.
"""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import yaml

from .paths import REPO

PYPROJECT = REPO / "pyproject.toml"
CHART_DIR = REPO / "charts" / "baton"
CHART_YAML = CHART_DIR / "Chart.yaml"
CHART_VALUES = CHART_DIR / "values.yaml"
PACKAGE_INIT = REPO / "baton" / "__init__.py"
RELEASE_WORKFLOW = REPO / ".github" / "workflows" / "release.yaml"


class VersionMismatch(ValueError):
    """The tag and the files disagree, or the files disagree among themselves."""


def _package_version(init: Path) -> str:
    """``__version__`` as assigned in the package's ``__init__.py`` (read, not imported)."""
    for node in ast.parse(init.read_text()).body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == "__version__" for t in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    raise VersionMismatch(f"{init} assigns no string __version__")


def declared_versions(repo: Path = REPO) -> dict[str, str]:
    """Every place the release's version is written, by a name that says where."""
    pyproject = tomllib.loads((repo / "pyproject.toml").read_text())
    chart = yaml.safe_load((repo / "charts" / "baton" / "Chart.yaml").read_text())
    return {
        "pyproject.toml [project] version": str(pyproject["project"]["version"]),
        "charts/baton/Chart.yaml version": str(chart["version"]),
        "charts/baton/Chart.yaml appVersion": str(chart["appVersion"]),
        "baton/__init__.py __version__": _package_version(repo / "baton" / "__init__.py"),
    }


def check_tag(tag: str, repo: Path = REPO) -> str:
    """The version a tag ``v<version>`` releases; raises if any file states another one."""
    if not tag.startswith("v") or len(tag) == 1:
        raise VersionMismatch(f"release tags look like v<version> (e.g. v0.2.0), got {tag!r}")
    version = tag[1:]
    found = declared_versions(repo)
    wrong = {where: v for where, v in found.items() if v != version}
    if wrong:
        listing = "\n".join(f"  {where}: {v}" for where, v in found.items())
        raise VersionMismatch(
            f"tag {tag} releases version {version}, but {len(wrong)} of these differ:\n{listing}\n"
            f"bump them all to {version} in a commit, then tag that commit {tag}"
        )
    return version


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m batondev.release v<version>", file=sys.stderr)
        return 2
    try:
        print(check_tag(argv[0]))
    except VersionMismatch as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
