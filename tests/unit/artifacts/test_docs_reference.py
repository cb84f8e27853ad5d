"""docs/reference/streamapp.md is generated from the CRD and must be current; doc links resolve."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from batondev.paths import CRD, REPO

from tests.support.scripts import load_script

DOCS = REPO / "docs"

pytestmark = pytest.mark.unit


def _gen() -> ModuleType:
    return load_script("docs_gen_reference", DOCS / "gen_reference.py")


def _spec_paths(schema: dict[str, Any], path: str) -> set[str]:
    out: set[str] = set()
    for name, sub in (schema.get("properties") or {}).items():
        full = f"{path}.{name}"
        out.add(full)
        out |= _spec_paths(sub, full)
    return out


def test_reference_matches_the_crd() -> None:
    gen = _gen()
    assert gen.OUT.read_text() == gen.render(), (
        "docs/reference/streamapp.md is stale: run `python docs/gen_reference.py`"
    )


def test_reference_documents_every_spec_field_and_rule() -> None:
    crd = yaml.safe_load(CRD.read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    page = (DOCS / "reference" / "streamapp.md").read_text()
    documented = set(re.findall(r"^\| `(spec\.[^`]+)`", page, re.MULTILINE))
    assert _spec_paths(schema["properties"]["spec"], "spec") <= documented
    assert page.count("spec.config must not set") == 1  # CEL messages are listed


DOC_PAGES = sorted(p for p in DOCS.rglob("*.md"))


@pytest.mark.parametrize("page", DOC_PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_relative_links_resolve(page: Path) -> None:
    text = page.read_text()
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if re.match(r"^[a-z]+://", target) or target.startswith("mailto:"):
            continue
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def test_the_docs_the_issue_asks_for_exist() -> None:
    for name in (
        "getting-started.md",
        "concepts.md",
        "operations.md",
        "comparison.md",
        "reference/streamapp.md",
    ):
        assert (DOCS / name).exists(), name
    ops = (DOCS / "operations.md").read_text()
    assert "kubectl apply --server-side" in ops, "the CRD upgrade path is documented"
    for topic in ("Rollback", "Failure scenarios", "commit interval", "segment"):
        assert topic.lower() in ops.lower(), topic
