"""Host tools from Debian: a missing one that cannot be installed fails naming the install step."""

from __future__ import annotations

import pytest
from batondev import debtools
from batondev.requirements import MissingTool

pytestmark = pytest.mark.unit


def test_present_tools_need_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda tool: f"/usr/bin/{tool}")
    monkeypatch.setattr(debtools, "_apt", lambda args: pytest.fail(f"apt-get {args} was run"))
    debtools.ensure("buildah", "runc")


def test_a_missing_tool_without_apt_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda tool: None)
    with pytest.raises(MissingTool) as caught:
        debtools.ensure("runc", "debootstrap")
    message = str(caught.value)
    assert "runc, debootstrap not on PATH" in message
    assert "apt-get install -y --no-install-recommends debootstrap runc" in message


def test_a_failed_install_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    calls: list[list[str]] = []

    def apt(args: list[str]) -> subprocess.CompletedProcess[str]:
        calls.append(args)
        return subprocess.CompletedProcess(["apt-get", *args], 100, "", "E: Unable to locate package buildah")

    monkeypatch.setattr("shutil.which", lambda tool: "/usr/bin/apt-get" if tool == "apt-get" else None)
    monkeypatch.setattr("os.geteuid", lambda: 0)
    monkeypatch.setattr(debtools, "_apt", apt)
    with pytest.raises(MissingTool, match="Unable to locate package buildah"):
        debtools.ensure("buildah")
    assert [c[0] for c in calls] == ["install", "update", "install"]  # lists refreshed once, then retried
    assert f"-o=Dir::Cache::Archives={debtools.DEBS}" in calls[0]  # the .debs are kept in the cache
