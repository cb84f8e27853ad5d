"""A release's version, read from every file that states it, and a tag checked against it.

``.github/workflows/release-build.yaml`` (called by release.yaml on a tag, and by ci.yaml as a
dry run on every push and pull request) asks this module, with ``dev`` on PYTHONPATH and
PyYAML installed, for the version it builds before it builds anything:

``python -m batondev.release v0.2.0``
    a release: the tag must be ``v`` followed by the version that pyproject.toml,
    charts/baton/Chart.yaml (``version`` and ``appVersion``) and ``baton.__version__``
    (which names the operator's default compactor image) all state, and a SemVer 2 version,
    as helm requires of a chart. Prints ``0.2.0``; on a mismatch exits 1 and says which file
    says what.
``python -m batondev.release --dev <run number> <commit>``
    a dry run: the same files must agree, and the version is theirs as a development
    pre-release of the run and the commit, ``0.2.0-dev.42+1a2b3c4`` (SemVer 2, and PEP 440:
    ``0.2.0.dev42+1a2b3c4``). It sorts before 0.2.0 and is never pushed beyond the runner.
``python -m batondev.release --oci-tag <version>``
    the tag the images are pushed as and the chart's appVersion: the version with SemVer's
    ``+`` (not allowed in an OCI tag) written ``_``, as ``helm push`` tags a chart. A chart
    of version X so installs the images tagged as helm tags X; for a release both are X.

The unit tests read the same files through this module, so the check and the tests share
one reader.
"""

from __future__ import annotations

import ast
import re
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
WORKFLOWS = REPO / ".github" / "workflows"
RELEASE_WORKFLOW = WORKFLOWS / "release.yaml"
BUILD_WORKFLOW = WORKFLOWS / "release-build.yaml"
CI_WORKFLOW = WORKFLOWS / "ci.yaml"

# semver.org's regular expression for a SemVer 2 version (helm refuses a chart version
# that is not one), and the OCI distribution spec's for a tag.
SEMVER = re.compile(
    r"(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?"
)
OCI_TAG = re.compile(r"[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}")
SHORT_SHA = 7


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
        "crds/streamapps.baton.dev.yaml baton.dev/version": str(
            yaml.safe_load((repo / "crds" / "streamapps.baton.dev.yaml").read_text())["metadata"][
                "annotations"
            ]["baton.dev/version"]
        ),
    }


def _listing(found: dict[str, str]) -> str:
    return "\n".join(f"  {where}: {v}" for where, v in found.items())


def the_version(repo: Path = REPO) -> str:
    """The one version every file states; raises, listing them, if they differ."""
    found = declared_versions(repo)
    versions = set(found.values())
    if len(versions) != 1:
        raise VersionMismatch(f"the files state different versions:\n{_listing(found)}\nbump them all to one")
    (version,) = versions
    _require_semver(version, "the files' version")
    return version


def _require_semver(version: str, what: str) -> None:
    if not SEMVER.fullmatch(version):
        raise VersionMismatch(f"{what} {version!r} is not a SemVer 2 version (helm requires one for a chart)")


def dev_version(run_number: int | str, commit: str, repo: Path = REPO) -> str:
    """A dry run's version: the files' version as a pre-release of the CI run and the commit.

    ``0.2.0`` -> ``0.2.0-dev.<run>+<7 hex>``; a version that is a pre-release already
    (``0.2.0-rc.1``) gets ``.dev.<run>`` appended, so PEP 440 still reads it (``0.2.0rc1.dev5``).
    """
    run = str(run_number)
    if not run.isdigit() or (len(run) > 1 and run.startswith("0")):
        raise VersionMismatch(f"a run number is a positive integer, got {run_number!r}")
    if not re.fullmatch(r"[0-9a-f]{7,64}", commit):
        raise VersionMismatch(f"a commit is its hex SHA, got {commit!r}")
    base = the_version(repo).partition("+")[0]
    separator = "." if "-" in base else "-"
    version = f"{base}{separator}dev.{run}+{commit[:SHORT_SHA]}"
    _require_semver(version, "the dev version")
    return version


def oci_tag(version: str) -> str:
    """The OCI tag of a version: ``+`` (SemVer build metadata) written ``_``, as helm pushes charts."""
    _require_semver(version, "version")
    tag = version.replace("+", "_")
    if not OCI_TAG.fullmatch(tag):
        raise VersionMismatch(f"{tag!r} is not a valid OCI tag")
    return tag


def check_tag(tag: str, repo: Path = REPO) -> str:
    """The version a tag ``v<version>`` releases; raises if any file states another one."""
    if not tag.startswith("v") or len(tag) == 1:
        raise VersionMismatch(f"release tags look like v<version> (e.g. v0.2.0), got {tag!r}")
    version = tag[1:]
    _require_semver(version, f"tag {tag} releases")
    found = declared_versions(repo)
    wrong = {where: v for where, v in found.items() if v != version}
    if wrong:
        raise VersionMismatch(
            f"tag {tag} releases version {version}, but {len(wrong)} of these differ:\n{_listing(found)}\n"
            f"bump them all to {version} in a commit, then tag that commit {tag}"
        )
    return version


USAGE = """usage: python -m batondev.release v<version>                 a release: the tag, checked
       python -m batondev.release --dev <run number> <commit>  a dry run's version
       python -m batondev.release --oci-tag <version>          its image tag and chart appVersion"""


def _answer(argv: list[str]) -> str | None:
    """What the command line asks for, or None for a command line that asks nothing known."""
    match argv:
        case ["--dev", run_number, commit]:
            return dev_version(run_number, commit)
        case ["--oci-tag", version]:
            return oci_tag(version)
        case [tag] if not tag.startswith("-"):
            return check_tag(tag)
    return None


def main(argv: list[str]) -> int:
    try:
        answer = _answer(argv)
    except VersionMismatch as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if answer is None:
        print(USAGE, file=sys.stderr)
        return 2
    print(answer)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
