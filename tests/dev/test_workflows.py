"""The GitHub Actions workflows in .github/workflows: actionlint-clean and pinned actions.

Every workflow file is linted, the reusable release-build.yaml included: actionlint also checks
each call of it (``uses: ./.github/workflows/...``) against its inputs.

actionlint is built from the Go module proxy into ~/.cache/baton/actionlint-<version>/ by
``dev/stack up actionlint`` (``make test`` runs ``dev/stack up``, which includes it). It runs
shellcheck on ``run:`` scripts when shellcheck is on PATH.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from batondev import gobuild, versions
from batondev.paths import REPO

WORKFLOWS = REPO / ".github" / "workflows"

pytestmark = pytest.mark.unit


def actionlint() -> Path:
    binary = gobuild.actionlint_dir() / "bin" / "actionlint"
    if not binary.exists():
        pytest.fail(
            f"actionlint {versions.ACTIONLINT} is not installed at {binary}: run `dev/stack up actionlint` "
            "once (it `go install`s github.com/rhysd/actionlint/cmd/actionlint; make test does this)",
            pytrace=False,
        )
    return binary


def run_actionlint(*files: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(actionlint()), "-no-color", *map(str, files)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )


def workflow_files() -> list[Path]:
    return sorted(p for p in WORKFLOWS.iterdir() if p.suffix in {".yaml", ".yml"})


def test_the_release_and_ci_workflows_exist() -> None:
    assert {p.name for p in workflow_files()} >= {"release.yaml", "release-build.yaml", "ci.yaml"}


def test_actionlint_passes_with_no_findings() -> None:
    out = run_actionlint(*workflow_files())
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout == "", out.stdout


def test_actionlint_reports_a_broken_workflow(tmp_path: Path) -> None:
    """The linter really reads the files it is given: an undefined step output is a finding."""
    broken = tmp_path / "broken.yaml"
    broken.write_text(
        "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n"
        "      - run: echo ${{ steps.nope.outputs.digest }}\n"
    )
    out = run_actionlint(broken)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "nope" in out.stdout


# A job that calls a workflow of this repository: it runs at the caller's commit, so it has no pin.
LOCAL_CALL = re.compile(r"uses: \./\.github/workflows/([\w.-]+\.ya?ml)")


def _jobs(path: Path) -> list[dict[str, Any]]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return list(doc["jobs"].values())


def _uses_lines() -> list[tuple[str, str]]:
    """(workflow, `uses:` line) for every step that uses an action and every job that calls a workflow."""
    found = []
    for path in workflow_files():
        jobs = _jobs(path)
        steps = [s for job in jobs for s in job.get("steps", []) if "uses" in s]
        calls = [job for job in jobs if "uses" in job]
        lines = [line.strip() for line in path.read_text().splitlines() if "uses:" in line]
        assert len(lines) == len(steps) + len(calls), f"{path.name}: one `uses:` per line expected"
        found += [(path.name, line) for line in lines]
    return found


def _action_lines() -> list[tuple[str, str]]:
    return [(workflow, line) for workflow, line in _uses_lines() if not LOCAL_CALL.fullmatch(line)]


def test_actions_are_pinned_by_commit_with_the_version_as_a_comment() -> None:
    uses = _action_lines()
    assert uses
    for workflow, line in uses:
        assert re.fullmatch(r"(- )?uses: [\w.-]+/[\w.-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+", line), (
            f"{workflow}: {line!r} must pin a full commit SHA and name its version in a comment"
        )


def test_workflow_calls_name_a_reusable_workflow_of_this_repository() -> None:
    calls = [LOCAL_CALL.fullmatch(line) for _, line in _uses_lines()]
    called = {m[1] for m in calls if m}
    assert called, "release.yaml and ci.yaml call release-build.yaml"
    for name in called:
        on = yaml.safe_load((WORKFLOWS / name).read_text())[True]  # YAML 1.1 reads `on` as true
        assert "workflow_call" in on, f"{name} is called but is not `on: workflow_call`"


def test_one_action_one_pin() -> None:
    """The same action is pinned to the same commit everywhere, so a bump cannot miss one."""
    pins: dict[str, set[str]] = {}
    for _, line in _action_lines():
        action, _, ref = line.split("uses: ", 1)[1].partition("@")
        pins.setdefault(action, set()).add(ref)
    assert {a: r for a, r in pins.items() if len(r) > 1} == {}


def test_every_job_that_runs_steps_has_a_timeout() -> None:
    for path in workflow_files():
        for job in _jobs(path):
            if "steps" in job:
                assert 0 < job["timeout-minutes"] <= 90, f"{path.name}: {job.get('name')}"


def test_ci_runs_the_ci_script_within_ci_time() -> None:
    job = yaml.safe_load((WORKFLOWS / "ci.yaml").read_text())["jobs"]["test"]
    assert job["timeout-minutes"] <= 90
    assert [s["run"] for s in job["steps"] if "run" in s] == ["bash .ci/run"]
