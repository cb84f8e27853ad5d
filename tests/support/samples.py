"""Sample StreamApp bodies and the CRD as data, for the operator's unit tests."""

from __future__ import annotations

import copy
from typing import Any

import yaml
from batondev.paths import CRD, EXAMPLE

from baton.operator.core.builders.statefulset import spec_hash
from baton.operator.core.spec import StreamApp


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


def sts(
    ready: int,
    *,
    replicas: int = 3,
    want_hash: str | None = None,
    generation: int = 1,
    observed: int = 1,
    current: str = "r1",
    update: str = "r1",
) -> dict[str, Any]:
    return {
        "metadata": {
            "generation": generation,
            "annotations": {"baton.dev/spec-hash": want_hash or spec_hash(app().spec)},
        },
        "status": {
            "observedGeneration": observed,
            "replicas": replicas,
            "readyReplicas": ready,
            "updatedReplicas": replicas,
            "currentRevision": current,
            "updateRevision": update,
        },
    }
