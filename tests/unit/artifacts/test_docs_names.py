"""What docs/ and the README name exists in the code: `baton` flags, `baton.dev/` annotations
and labels, conditions, StreamApp fields. (Metrics: test_docs_metrics.py.)

Each check reads the docs as a user would copy from them: a command line that starts with
`baton <command>`, a `spec.` path, a `baton.dev/` key, a `--for=condition=` wait.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import pytest
import yaml
from batondev.paths import CRD, REPO

from baton.cli import _COMMANDS, main

pytestmark = pytest.mark.unit

DOCS = sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md"])
COMMAND_LINE = re.compile(r"(?:^\s*|[`$]\s*|\|\s*)baton (" + "|".join(_COMMANDS) + r")\b([^`\n|]*)", re.M)
FLAG = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)")
SPEC_PATH = re.compile(r"\bspec\.([a-z][A-Za-z0-9]*(?:\.[a-z][A-Za-z0-9]*)*)")
KEY = re.compile(r"\bbaton\.dev/[a-z0-9][a-z0-9.-]*[a-z0-9]")
CONDITION = re.compile(r"--for=condition=([A-Za-z]+)")
CONDITIONS = {"Ready", "Reconciling", "Stalled", "StandbyReady"}
# `spec.` words that are not StreamApp fields: a Pod's spec.nodeName, the module operator/core/spec.py
NOT_STREAMAPP = {"nodeName", "py"}


def _ids(paths: list[Path]) -> list[str]:
    return [p.relative_to(REPO).as_posix() for p in paths]


def _options(command: str) -> set[str]:
    found = main.get_command(click.Context(main), command)
    assert found is not None
    names = {"--help"}
    for param in found.params:
        names |= {o for o in [*param.opts, *param.secondary_opts] if o.startswith("--")}
    return names


def _spec_paths(schema: dict[str, Any], path: str = "") -> set[str]:
    """Every field path under spec, arrays' items and maps' values walked through."""
    out: set[str] = set()
    for name, sub in (schema.get("properties") or {}).items():
        full = f"{path}.{name}" if path else name
        out.add(full)
        out |= _spec_paths(sub, full)
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), dict):
            out |= _spec_paths(schema[key], path)
    return out


def _crd_spec() -> dict[str, Any]:
    crd = yaml.safe_load(CRD.read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def _code_keys() -> set[str]:
    text = "\n".join(
        p.read_text()
        for folder in ("baton", "charts", "crds", "argocd", "examples", "dev")
        for p in (REPO / folder).rglob("*")
        if p.is_file() and p.suffix in {".py", ".yaml", ".tpl", ".lua", ".json"}
    )
    return set(KEY.findall(text))


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_baton_command_lines_use_flags_the_command_has(doc: Path) -> None:
    unknown = []
    text = re.sub(r"\\\n\s*", " ", doc.read_text())  # a shell line continued with a backslash
    for command, rest in COMMAND_LINE.findall(text):
        known = _options(command)
        unknown += [f"baton {command} {flag}" for flag in FLAG.findall(rest) if flag not in known]
    assert not unknown, f"{doc.name} names flags the commands do not have: {sorted(set(unknown))}"


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_streamapp_fields_named_exist(doc: Path) -> None:
    known = _spec_paths(_crd_spec())
    named = set(SPEC_PATH.findall(doc.read_text())) - NOT_STREAMAPP
    unknown = sorted(p for p in named if p not in known)
    assert not unknown, (
        f"{doc.name} names StreamApp fields the CRD does not have: {['spec.' + p for p in unknown]}"
    )


@pytest.mark.parametrize("doc", DOCS, ids=_ids(DOCS))
def test_annotations_labels_and_conditions_named_exist(doc: Path) -> None:
    text = doc.read_text()
    keys = sorted(set(KEY.findall(text)) - _code_keys())
    assert not keys, f"{doc.name} names baton.dev/ keys the code does not use: {keys}"
    conditions = sorted(set(CONDITION.findall(text)) - CONDITIONS)
    assert not conditions, f"{doc.name} waits for conditions the operator does not write: {conditions}"


def test_the_checks_bite() -> None:
    """A wrong flag, field, key and condition, each caught by the patterns above."""
    line = "run `baton flip clicks --to blue --bootstrap-server k:9092` then"
    ((command, rest),) = COMMAND_LINE.findall(line)
    assert "--bootstrap-server" not in _options(command) and "--bootstrap-server" in FLAG.findall(rest)
    assert "podTemplate.sidecar" not in _spec_paths(_crd_spec())
    assert "podTemplate.sidecars" in _spec_paths(_crd_spec())
    assert "baton.dev/flip-to" not in _code_keys() and "baton.dev/promote" in _code_keys()
    assert CONDITION.findall("kubectl wait --for=condition=Avaliable") == ["Avaliable"]
