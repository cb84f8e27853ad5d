"""What the release publishes is what the chart and the operator pull by default.

Every value here is read from the file that states it (release.yaml, the chart, pyproject,
the package), through batondev.release where the release workflow itself reads them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from batondev import release
from batondev.paths import REPO

from baton.compactor.cronjob import DEFAULT_IMAGE
from tests.support.helm import CHART, one, render

pytestmark = pytest.mark.unit

VERSION_OUTPUT = "${{ needs.version.outputs.version }}"


def workflow() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(release.RELEASE_WORKFLOW.read_text())
    return doc


def published_images() -> dict[str, str]:
    """Dockerfile target -> image repository, as the release's build matrix pushes them."""
    job = workflow()["jobs"]["images"]
    (build,) = [s for s in job["steps"] if s.get("uses", "").startswith("docker/build-push-action@")]
    assert build["with"]["target"] == "${{ matrix.target }}"
    assert build["with"]["tags"] == "${{ matrix.image }}:" + VERSION_OUTPUT, "one tag: the version"
    return {row["target"]: row["image"] for row in job["strategy"]["matrix"]["include"]}


def the_version() -> str:
    versions = set(release.declared_versions().values())
    assert len(versions) == 1, release.declared_versions()
    return versions.pop()


def test_the_files_state_one_version_and_its_tag_passes_the_check() -> None:
    version = the_version()
    assert release.check_tag(f"v{version}") == version


def test_release_publishes_the_images_the_chart_and_operator_default_to() -> None:
    values = yaml.safe_load(release.CHART_VALUES.read_text())
    version = the_version()
    assert published_images() == {
        "runtime": values["image"]["repository"],
        "compactor": values["compactorImage"]["repository"],
    }
    # empty tags: the chart pulls its appVersion, which is the released version
    assert values["image"]["tag"] == values["compactorImage"]["tag"] == ""
    assert f"{published_images()['compactor']}:{version}" == DEFAULT_IMAGE
    container = one(render(), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{published_images()['runtime']}:{version}"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["BATON_COMPACTOR_IMAGE"] == DEFAULT_IMAGE


def test_release_builds_both_dockerfile_targets_for_amd64_and_arm64_with_sbom_and_provenance() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    for target in published_images():
        assert f" AS {target}\n" in dockerfile, f"the Dockerfile has no {target} stage"
    (build,) = [
        s for s in workflow()["jobs"]["images"]["steps"] if s.get("uses", "").startswith("docker/build-push")
    ]
    assert set(build["with"]["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert build["with"]["push"] is True
    assert build["with"]["sbom"] is True
    assert build["with"]["provenance"] == "mode=max"


def test_release_signs_what_it_pushes_and_checks_the_tag_first() -> None:
    jobs = workflow()["jobs"]
    runs = {name: " ".join(s.get("run", "") for s in job["steps"]) for name, job in jobs.items()}
    assert "python -m batondev.release" in runs["version"]
    assert "cosign sign --yes" in runs["images"] and "@$DIGEST" in runs["images"]
    assert "cosign sign --yes" in runs["chart"]
    assert jobs["images"]["needs"] == "version"
    assert set(jobs["chart"]["needs"]) == {"version", "images"}, "the chart is published after its images"
    for name in ("images", "chart"):
        assert jobs[name]["permissions"] == {"contents": "read", "packages": "write", "id-token": "write"}
    assert '--version "$VERSION" --app-version "$VERSION"' in runs["chart"]


def test_the_docs_name_what_the_release_publishes() -> None:
    ops = (REPO / "docs" / "operations.md").read_text()
    chart_name = yaml.safe_load((CHART / "Chart.yaml").read_text())["name"]
    assert f"{workflow()['env']['CHART_REPOSITORY']}/{chart_name}" in ops
    for image in published_images().values():
        assert image in ops
    assert "cosign verify" in ops


def test_a_tag_that_is_not_the_version_fails_with_the_files_that_say_otherwise(tmp_path: Path) -> None:
    for rel in ("pyproject.toml", "charts/baton/Chart.yaml", "baton/__init__.py"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    version = the_version()
    chart = tmp_path / "charts/baton/Chart.yaml"
    chart.write_text(chart.read_text().replace(f'appVersion: "{version}"', 'appVersion: "9.9.9"'))
    with pytest.raises(release.VersionMismatch) as err:
        release.check_tag(f"v{version}", tmp_path)
    assert "1 of these differ" in str(err.value)
    assert "charts/baton/Chart.yaml appVersion: 9.9.9" in str(err.value)
    with pytest.raises(release.VersionMismatch, match="look like v<version>"):
        release.check_tag(version)


def test_the_check_as_the_workflow_runs_it() -> None:
    """`python -m batondev.release TAG` prints the version, or exits 1 naming the mismatch."""

    def check(tag: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "batondev.release", tag],
            cwd=REPO,
            env={"PYTHONPATH": str(REPO / "dev"), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )

    version = the_version()
    ok = check(f"v{version}")
    assert (ok.returncode, ok.stdout) == (0, f"{version}\n"), ok.stderr
    bad = check("v999.0.0")
    assert bad.returncode == 1 and bad.stdout == ""
    assert "pyproject.toml [project] version" in bad.stderr and "v999.0.0" in bad.stderr
