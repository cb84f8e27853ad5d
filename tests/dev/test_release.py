"""What the release publishes is what the chart and the operator pull by default, and CI runs it.

The release's steps live in release-build.yaml, a reusable workflow: release.yaml calls it on a
tag to publish, ci.yaml on every push and pull request as a dry run (a dev version, a registry
on the runner, a key pair made for the run). Every value here is read from the file that
states it (the workflows, the chart, pyproject, the package), through batondev.release where
the workflow itself reads them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from batondev import release
from batondev.paths import REPO
from packaging.version import Version

from baton.operator.core.compaction.cronjob import DEFAULT_IMAGE
from tests.support.helm import CHART, helm, one, render

pytestmark = pytest.mark.unit

TAG_OUTPUT = "${{ needs.version.outputs.tag }}"
BUILD_CALL = "./.github/workflows/release-build.yaml"
COMMIT = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"


def load(path: Path) -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load(path.read_text())
    if True in doc:  # YAML 1.1 reads the key `on` as true
        doc["on"] = doc.pop(True)
    return doc


def build() -> dict[str, Any]:
    return load(release.BUILD_WORKFLOW)


def registries() -> tuple[str, str]:
    """(where a release publishes, where a dry run pushes), from the build's REGISTRY."""
    found = re.fullmatch(
        r"\$\{\{ inputs\.publish && '([^']+)' \|\| '([^']+)' \}\}", build()["env"]["REGISTRY"]
    )
    assert found, build()["env"]["REGISTRY"]
    return found[1], found[2]


def step(job: dict[str, Any], uses: str) -> dict[str, Any]:
    (found,) = [s for s in job["steps"] if s.get("uses", "").startswith(f"{uses}@")]
    assert isinstance(found, dict)
    return found


def runs(job: dict[str, Any]) -> str:
    return "\n".join(s.get("run", "") for s in job["steps"])


def published_images() -> dict[str, str]:
    """Dockerfile target -> image repository, as a release's build matrix pushes them."""
    job = build()["jobs"]["images"]
    pushed = step(job, "docker/build-push-action")["with"]
    assert pushed["target"] == "${{ matrix.target }}"
    assert pushed["tags"] == "${{ env.REGISTRY }}/${{ matrix.image }}:" + TAG_OUTPUT, "one tag: the version's"
    publish_registry, _ = registries()
    return {
        row["target"]: f"{publish_registry}/{row['image']}" for row in job["strategy"]["matrix"]["include"]
    }


def caller(workflow: Path) -> dict[str, Any]:
    """The one job of a workflow that calls the release's build."""
    (job,) = [j for j in load(workflow)["jobs"].values() if j.get("uses") == BUILD_CALL]
    assert isinstance(job, dict)
    return job


def test_the_files_state_one_version_and_its_tag_passes_the_check() -> None:
    version = release.the_version()
    assert release.check_tag(f"v{version}") == version == release.oci_tag(version)


def test_release_publishes_the_images_the_chart_and_operator_default_to() -> None:
    values = yaml.safe_load(release.CHART_VALUES.read_text())
    version = release.the_version()
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
    # the chart job checks that the packaged chart pulls these, at the version's tag
    (package,) = [s for s in build()["jobs"]["chart"]["steps"] if "helm package" in s.get("run", "")]
    assert package["env"]["CHART_IMAGES"].split() == list(published_images().values())


def test_release_builds_both_dockerfile_targets_for_amd64_and_arm64_with_sbom_and_provenance() -> None:
    dockerfile = (REPO / "Dockerfile").read_text()
    for target in published_images():
        assert f" AS {target}\n" in dockerfile, f"the Dockerfile has no {target} stage"
    pushed = step(build()["jobs"]["images"], "docker/build-push-action")["with"]
    assert set(pushed["platforms"].split(",")) == {"linux/amd64", "linux/arm64"}
    assert pushed["push"] is True
    assert pushed["sbom"] is True
    assert pushed["provenance"] == "mode=max"
    # only a dry run reads and writes the layer cache
    for key in ("cache-from", "cache-to"):
        assert pushed[key].startswith("${{ !inputs.publish && format('type=gha,"), pushed[key]
    assert 'platforms" != "linux/amd64,linux/arm64"' in runs(build()["jobs"]["images"])


def test_the_tag_publishes_and_ci_runs_the_same_build_as_a_dry_run() -> None:
    release_wf, ci = load(release.RELEASE_WORKFLOW), load(release.CI_WORKFLOW)
    assert release_wf["on"] == {"push": {"tags": ["v*"]}}
    assert caller(release.RELEASE_WORKFLOW)["with"] == {"publish": True}
    assert caller(release.RELEASE_WORKFLOW)["permissions"] == {
        "contents": "read",
        "packages": "write",
        "id-token": "write",
    }
    assert set(ci["on"]) == {"push", "pull_request"}
    assert caller(release.CI_WORKFLOW)["with"] == {"publish": False}
    assert caller(release.CI_WORKFLOW)["permissions"] == {"contents": "read"}, "a dry run publishes nothing"

    wf = build()
    assert set(wf["on"]) == {"workflow_call"}, "only callable: it runs as its callers say"
    assert wf["on"]["workflow_call"]["inputs"]["publish"] == {
        "description": wf["on"]["workflow_call"]["inputs"]["publish"]["description"],
        "type": "boolean",
        "required": True,
    }
    # A called workflow may not ask for more than its caller grants (GitHub would not start
    # the CI run): the jobs that push and sign take the caller's permissions.
    assert "permissions" not in wf
    jobs = wf["jobs"]
    assert jobs["version"]["permissions"] == {"contents": "read"}
    assert "permissions" not in jobs["images"] and "permissions" not in jobs["chart"]
    assert jobs["images"]["needs"] == "version"
    assert set(jobs["chart"]["needs"]) == {"version", "images"}, "the chart is published after its images"
    assert all(job["timeout-minutes"] <= 90 for job in jobs.values())


def test_the_version_is_the_tag_on_a_release_and_a_dev_version_in_a_dry_run() -> None:
    script = runs(build()["jobs"]["version"])
    assert 'if [ "$REF_TYPE" != tag ]' in script, "publishing from a branch is refused"
    assert 'python -m batondev.release "$REF_NAME"' in script
    assert 'python -m batondev.release --dev "$RUN_NUMBER" "$COMMIT"' in script
    assert 'python -m batondev.release --oci-tag "$version"' in script
    chart = runs(build()["jobs"]["chart"])
    assert '--version "$VERSION" --app-version "$TAG"' in chart, "the chart's appVersion is its images' tag"


def test_each_run_signs_what_it_pushes_by_digest_and_verifies_it() -> None:
    wf = build()
    for name in ("images", "chart"):
        job = wf["jobs"][name]
        (sign,) = [s for s in job["steps"] if "cosign sign" in s.get("run", "")]
        assert re.search(r"@\$\{\{ steps\.\w+\.outputs\.digest \}\}$", sign["env"]["REF"]), sign["env"]["REF"]
        script = sign["run"]
        # a release: keyless, checked against the identity the docs tell users to check
        assert 'cosign sign --yes "$REF"' in script
        assert (
            'cosign verify --certificate-identity "$SIGNER" --certificate-oidc-issuer "$OIDC_ISSUER"'
            in script
        )
        # a dry run: the key made for the run, offline
        assert (
            'cosign sign --yes --key "$KEYS/cosign.key" --use-signing-config=false --tlog-upload=false'
            in script
        )
        assert 'cosign verify --key "$KEYS/cosign.pub" --insecure-ignore-tlog=true' in script
        (keygen,) = [s for s in job["steps"] if "cosign generate-key-pair" in s.get("run", "")]
        assert keygen["if"] == "${{ !inputs.publish }}"
        assert keygen["env"] == {"COSIGN_PASSWORD": ""}
    assert wf["env"]["SIGNER"] == (
        "${{ github.server_url }}/${{ github.repository }}/.github/workflows/"
        f"{release.BUILD_WORKFLOW.name}@${{{{ github.ref }}}}"
    )


def test_a_dry_run_pushes_to_a_registry_on_the_runner_and_logs_in_nowhere() -> None:
    publish_registry, dry_registry = registries()
    assert (publish_registry, dry_registry) == ("ghcr.io", "localhost:5000")
    wf = build()
    assert re.fullmatch(r"registry:2@sha256:[0-9a-f]{64}", wf["env"]["LOCAL_REGISTRY_IMAGE"])
    for name in ("images", "chart"):
        steps = wf["jobs"][name]["steps"]
        (start,) = [s for s in steps if '"$LOCAL_REGISTRY_IMAGE"' in s.get("run", "")]
        assert start["if"] == "${{ !inputs.publish }}"
        assert "--publish 127.0.0.1:5000:5000" in start["run"]
    images = wf["jobs"]["images"]
    assert step(images, "docker/login-action")["if"] == "${{ inputs.publish }}"
    assert step(images, "docker/setup-buildx-action")["with"]["driver-opts"] == "network=host"
    chart = runs(wf["jobs"]["chart"])
    assert "plain_http=(--plain-http)" in chart and 'helm push "${plain_http[@]}"' in chart
    assert 'helm pull "${plain_http[@]}"' in chart, "the pushed chart is pulled back by its version"


def test_every_action_of_the_release_is_pinned_by_commit() -> None:
    for path in (release.RELEASE_WORKFLOW, release.BUILD_WORKFLOW, release.CI_WORKFLOW):
        for name, job in load(path)["jobs"].items():
            if "uses" in job:
                assert job["uses"] == BUILD_CALL, f"{path.name} {name}: calls only the release's build"
            for s in job.get("steps", []):
                if "uses" in s:
                    assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", s["uses"]), (
                        f"{path.name}: {s['uses']}"
                    )


def test_the_docs_name_what_the_release_publishes() -> None:
    ops = (REPO / "docs" / "operations.md").read_text()
    chart_name = yaml.safe_load((CHART / "Chart.yaml").read_text())["name"]
    publish_registry, _ = registries()
    assert f"oci://{publish_registry}/{build()['env']['CHARTS']}/{chart_name}" in ops
    for image in published_images().values():
        assert image in ops
    assert "cosign verify" in ops
    # the identity a keyless signature names is the called workflow's, at the tag
    assert f"/.github/workflows/{release.BUILD_WORKFLOW.name}@refs/tags/v" in ops
    assert "dry run" in ops and release.BUILD_WORKFLOW.name in ops


def test_a_tag_that_is_not_the_version_fails_with_the_files_that_say_otherwise(tmp_path: Path) -> None:
    for rel in (
        "pyproject.toml",
        "charts/baton/Chart.yaml",
        "baton/__init__.py",
        "crds/streamapps.baton.dev.yaml",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    version = release.the_version()
    chart = tmp_path / "charts/baton/Chart.yaml"
    chart.write_text(chart.read_text().replace(f'appVersion: "{version}"', 'appVersion: "9.9.9"'))
    with pytest.raises(release.VersionMismatch) as err:
        release.check_tag(f"v{version}", tmp_path)
    assert "1 of these differ" in str(err.value)
    assert "charts/baton/Chart.yaml appVersion: 9.9.9" in str(err.value)
    with pytest.raises(release.VersionMismatch, match="look like v<version>"):
        release.check_tag(version)
    with pytest.raises(release.VersionMismatch, match="not a SemVer 2 version"):
        release.check_tag("v0.2")
    # a dry run builds nothing from files that disagree either
    with pytest.raises(release.VersionMismatch, match="different versions"):
        release.dev_version(1, COMMIT, tmp_path)


def test_a_dry_runs_version_is_semver_pep440_and_sorts_before_its_release(tmp_path: Path) -> None:
    version = release.the_version()
    dev = release.dev_version(42, COMMIT)
    assert dev == f"{version}-dev.42+0a1b2c3"
    assert release.SEMVER.fullmatch(dev)
    assert Version(dev) == Version(f"{version}.dev42+0a1b2c3") < Version(version)
    assert release.oci_tag(dev) == f"{version}-dev.42_0a1b2c3", "OCI tags have no +: helm writes it _"
    assert release.OCI_TAG.fullmatch(release.oci_tag(dev))
    # a release candidate's dry run stays PEP 440 too
    for rel in (
        "pyproject.toml",
        "charts/baton/Chart.yaml",
        "baton/__init__.py",
        "crds/streamapps.baton.dev.yaml",
    ):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((REPO / rel).read_text().replace(version, "0.2.0-rc.1"))
    rc = release.dev_version(7, COMMIT, tmp_path)
    assert rc == "0.2.0-rc.1.dev.7+0a1b2c3" and release.SEMVER.fullmatch(rc)
    assert Version(rc) == Version("0.2.0rc1.dev7+0a1b2c3")
    for run, commit in ((0.5, COMMIT), ("07", COMMIT), ("x", COMMIT), (1, "main"), (1, "0a1b2c")):
        with pytest.raises(release.VersionMismatch):
            release.dev_version(run, commit)  # type: ignore[arg-type]


def test_a_packaged_dev_chart_pulls_the_images_of_its_version(tmp_path: Path) -> None:
    """What the chart job does before it pushes: package as the version, render the package."""
    version = release.dev_version(42, COMMIT)
    tag = release.oci_tag(version)
    helm("package", str(CHART), "--version", version, "--app-version", tag, "--destination", str(tmp_path))
    packaged = tmp_path / f"baton-{version}.tgz"
    shown = yaml.safe_load(helm("show", "chart", str(packaged)).stdout)
    assert (shown["version"], shown["appVersion"]) == (version, tag)
    objs = [d for d in yaml.safe_load_all(helm("template", "rel", str(packaged)).stdout) if d]
    deployment = one(objs, "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == f"{published_images()['runtime']}:{tag}"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["BATON_COMPACTOR_IMAGE"] == f"{published_images()['compactor']}:{tag}"
    # label values may not hold a +: the chart's labels carry the tag form
    assert deployment["metadata"]["labels"]["app.kubernetes.io/version"] == tag


def test_the_check_as_the_workflow_runs_it() -> None:
    """`python -m batondev.release ...` prints the version, or exits 1 naming the mismatch."""

    def check(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "batondev.release", *args],
            cwd=REPO,
            env={"PYTHONPATH": str(REPO / "dev"), "PATH": "/usr/bin:/bin"},
            capture_output=True,
            text=True,
            timeout=60,
        )

    version = release.the_version()
    ok = check(f"v{version}")
    assert (ok.returncode, ok.stdout) == (0, f"{version}\n"), ok.stderr
    bad = check("v999.0.0")
    assert bad.returncode == 1 and bad.stdout == ""
    assert "pyproject.toml [project] version" in bad.stderr and "v999.0.0" in bad.stderr
    dev = check("--dev", "42", COMMIT)
    assert (dev.returncode, dev.stdout) == (0, f"{version}-dev.42+0a1b2c3\n"), dev.stderr
    tag = check("--oci-tag", dev.stdout.strip())
    assert (tag.returncode, tag.stdout) == (0, f"{version}-dev.42_0a1b2c3\n"), tag.stderr
    assert check("--dev", "42").returncode == 2
