"""The image's lockfiles stay in sync with pyproject (``dev/image lock`` regenerates them)."""

from __future__ import annotations

from pathlib import Path

import pytest
from batondev import imagelock
from batondev.paths import REPO

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("lock", [imagelock.IMAGE_LOCK, imagelock.COMPACTOR_LOCK], ids=lambda p: p.name)
def test_lockfile_is_in_sync_with_pyproject(lock: Path) -> None:
    assert imagelock.in_sync(lock) == []


def test_a_changed_dependency_is_noticed(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text((REPO / "pyproject.toml").read_text().replace('"click>=8.1,<9"', '"click>=99"'))
    problems = imagelock.in_sync(imagelock.IMAGE_LOCK, pyproject)
    assert any("other pyproject dependencies" in p for p in problems), problems
    assert any(p.startswith("image.lock pins click==") and ">=99" in p for p in problems), problems


def test_a_pin_without_hashes_is_noticed(tmp_path: Path) -> None:
    lock = tmp_path / "image.lock"
    lock.write_text(imagelock.IMAGE_LOCK.read_text() + "extra-thing==1.0\n")
    assert "extra-thing" in imagelock.pins(lock.read_text())
    assert imagelock.in_sync(lock) == ["image.lock: extra-thing==1.0 has no hashes"]
