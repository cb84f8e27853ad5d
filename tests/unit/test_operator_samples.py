"""Sample StreamApp bodies shared by the operator's unit tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from baton.operator.spec import StreamApp

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "click-counter.yaml"
CRD = REPO / "crds" / "streamapps.baton.dev.yaml"


def example_body() -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"].update({"namespace": "shop", "uid": "1234-abcd", "generation": 3})
    return body


def app(**spec_overrides: Any) -> StreamApp:
    """The click counter, applied (uid, generation), with spec fields replaced."""
    body = copy.deepcopy(example_body())
    body["spec"].update(spec_overrides)
    return StreamApp.from_body(body)


def crd() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(CRD.read_text())
    return doc


def spec_schema() -> dict[str, Any]:
    schema: dict[str, Any] = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return schema


def test_the_example_parses_as_a_streamapp() -> None:
    sample = StreamApp.from_body(example_body())
    assert sample.application_id == "click-counter"
    assert sample.control_topic == "click-counter-control"
