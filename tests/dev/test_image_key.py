"""dev/image's cache key: what the Dockerfile reads changes it, anything else does not."""

from __future__ import annotations

from pathlib import Path

import pytest
from batondev import image, paths

pytestmark = pytest.mark.unit


def _tree(root: Path) -> None:
    for rel in ("Dockerfile", ".dockerignore", "pyproject.toml", "README.md", "requirements/image.lock"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(rel)
    (root / "baton").mkdir()
    (root / "baton" / "cli.py").write_text("x = 1\n")
    (root / "examples").mkdir()
    (root / "tests").mkdir()


def test_key_follows_the_image_inputs_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _tree(tmp_path)
    monkeypatch.setattr(paths, "REPO", tmp_path)
    bases = ("localhost/base:1", "localhost/maven:1")
    key = image.inputs_key(bases)
    assert image.inputs_key(bases) == key  # stable
    (tmp_path / "tests" / "test_x.py").write_text("changed")
    (tmp_path / "baton" / "__pycache__").mkdir()
    (tmp_path / "baton" / "__pycache__" / "cli.pyc").write_text("bytecode")
    assert image.inputs_key(bases) == key, "tests/ and bytecode are not in the image"
    (tmp_path / "baton" / "cli.py").write_text("x = 2\n")
    changed = image.inputs_key(bases)
    assert changed != key
    assert image.inputs_key(("localhost/base:2", bases[1])) != changed, "a new base is a new image"
    (tmp_path / "requirements" / "image.lock").write_text("other")
    assert image.inputs_key(bases) != changed
