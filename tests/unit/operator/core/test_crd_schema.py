"""The StreamApp CRD's shape, documentation, and agreement with the operator's spec model."""

from __future__ import annotations

import importlib
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
import yaml
from batondev.paths import CRD, EXAMPLE
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from baton.operator.core.spec import StreamAppSpec
from baton.worker.config import WorkerConfig
from tests.support.samples import crd, spec_schema

pytestmark = pytest.mark.unit


def _walk(schema: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    out = [(path, schema)]
    for name, sub in (schema.get("properties") or {}).items():
        out += _walk(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        out += _walk(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        out += _walk(schema["additionalProperties"], f"{path}{{}}")
    return out


def test_names_scope_and_subresources() -> None:
    doc = crd()
    spec = doc["spec"]
    assert doc["metadata"]["name"] == "streamapps.baton.dev"
    assert spec["group"] == "baton.dev"
    assert spec["names"]["kind"] == "StreamApp"
    assert spec["names"]["shortNames"] == ["sapp"]
    assert "baton" in spec["names"]["categories"]
    (version,) = spec["versions"]
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    assert version["subresources"]["status"] == {}
    assert version["subresources"]["scale"] == {
        "specReplicasPath": ".spec.replicas",
        "statusReplicasPath": ".status.replicas",
        "labelSelectorPath": ".status.selector",
    }


def test_printer_columns() -> None:
    columns = {c["name"]: c["jsonPath"] for c in crd()["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns["Active"] == ".status.activeColor"
    assert columns["Ready"] == '.status.conditions[?(@.type=="Ready")].status'
    assert columns["Phase"] == ".status.phase"
    assert columns["Replicas"] == ".spec.replicas"
    assert columns["Lag"] == ".status.lag"
    assert columns["Age"] == ".metadata.creationTimestamp"


def test_every_field_is_described() -> None:
    """`kubectl explain sapp.spec...` documents every field."""
    root = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    missing = [
        path
        for path, sub in _walk(root, "sapp")
        if path != "sapp.metadata"
        and not sub.get("description")
        and not path.endswith("{}")
        and not path.endswith("[]")
    ]
    assert missing == []


def test_status_conditions_merge_by_type() -> None:
    status = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    conditions = status["properties"]["conditions"]
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]


def test_cel_rules_have_messages_naming_the_field() -> None:
    """Each rule's message starts with the field it is about, so a person knows what to fix."""
    root = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    rules = [(path, r) for path, sub in _walk(root, "") for r in sub.get("x-kubernetes-validations", [])]
    assert len(rules) >= 12
    for path, rule in rules:
        assert rule["message"].split(" ")[0].startswith(("spec.", "metadata.")), (path, rule)


def _model_fields(model: type[BaseModel]) -> dict[str, Any]:
    return {(f.alias or name): f for name, f in model.model_fields.items()}


def _compare(model: type[BaseModel], schema: dict[str, Any], path: str) -> list[str]:
    """Mismatches between a pydantic model and a CRD object schema: names, defaults, required."""
    problems: list[str] = []
    fields = _model_fields(model)
    props = schema.get("properties") or {}
    if set(fields) != set(props):
        problems.append(
            f"{path}: model {sorted(set(fields) - set(props))} vs CRD {sorted(set(props) - set(fields))}"
        )
    for name, field in fields.items():
        sub = props.get(name)
        if sub is None:
            continue
        annotation = field.annotation
        nested = annotation if isinstance(annotation, type) and issubclass(annotation, BaseModel) else None
        if nested is None:
            for arg in getattr(annotation, "__args__", ()):
                if isinstance(arg, type) and issubclass(arg, BaseModel):
                    nested = arg
        if nested is not None and sub.get("type") == "object" and "properties" in sub:
            problems += _compare(nested, sub, f"{path}.{name}")
            continue
        if "default" in sub and field.default != sub["default"]:
            problems.append(
                f"{path}.{name}: default {field.default!r} in the model, {sub['default']!r} in the CRD"
            )
        if field.is_required() != (name in schema.get("required", [])):
            problems.append(f"{path}.{name}: required differs")
        if "enum" in sub:
            assert annotation is not None
            literal = set(getattr(annotation, "__args__", ())) - {type(None)}
            if literal != set(sub["enum"]):
                problems.append(f"{path}.{name}: enum {literal} vs {sub['enum']}")
    return problems


def test_spec_model_matches_the_crd() -> None:
    """Names, defaults, enums and required fields agree between operator/core/spec.py and the CRD."""
    assert _compare(StreamAppSpec, spec_schema(), "spec") == []


def test_object_defaults_are_complete() -> None:
    """Objects with nested defaults are defaulted themselves, so the defaults always apply."""
    props = spec_schema()["properties"]
    for name in ("worker", "state", "upgrade", "compaction", "placement"):
        assert props[name].get("default") == {}, name


def test_example_validates_against_the_schema() -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    example = yaml.safe_load(EXAMPLE.read_text())
    jsonschema.validate(example, schema)
    assert example["spec"]["topology"] == "examples.click_counter:topology"


@pytest.mark.parametrize(
    "path",
    sorted(
        p.name for p in EXAMPLE.parent.glob("*.yaml") if yaml.safe_load(p.read_text())["kind"] == "StreamApp"
    ),
)
def test_every_example_app_validates_and_its_topology_builds(path: str) -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    example = yaml.safe_load((EXAMPLE.parent / path).read_text())
    jsonschema.validate(example, schema)
    module, _, attr = example["spec"]["topology"].partition(":")
    topology = getattr(importlib.import_module(module), attr or "topology")
    assert topology.build().subtopologies


def test_crd_file_is_a_single_document() -> None:
    """The Helm chart includes this very file; one CRD per file keeps that simple."""
    assert len([d for d in yaml.safe_load_all(CRD.read_text()) if d]) == 1


# CRD spec fields that the operator passes to the worker as settings of another name.
WORKER_SETTINGS = {
    "standbyReplicas": "num_standby_replicas",
    "processesPerPod": "processes",
    "acceptableRecoveryLag": "acceptable_recovery_lag",
    "maxWarmupReplicas": "max_warmup_replicas",
    "probingRebalanceIntervalMs": "probing_rebalance_interval_ms",
}


def _bound(field: FieldInfo, name: str) -> Any:
    """The ``ge`` or ``le`` bound of a pydantic field (None when it has none)."""
    return next((getattr(m, name) for m in field.metadata if hasattr(m, name)), None)


@pytest.mark.parametrize(("crd_field", "worker_field"), sorted(WORKER_SETTINGS.items()))
def test_worker_settings_have_the_workers_default_and_bounds(crd_field: str, worker_field: str) -> None:
    """The API server refuses what the worker would refuse, and defaults what it defaults."""
    sub = spec_schema()["properties"][crd_field]
    field = WorkerConfig.model_fields[worker_field]
    assert sub["type"] == "integer"
    assert sub["default"] == field.default
    assert sub["minimum"] == _bound(field, "ge")
    assert sub.get("maximum") == _bound(field, "le")
    assert worker_field.replace("_", ".") in sub["description"]  # names the Kafka Streams setting


def _with_spec(**changes: Any) -> dict[str, Any]:
    example: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    example["spec"].update(changes)
    return example


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"acceptableRecoveryLag": -1}, "acceptableRecoveryLag"),
        ({"maxWarmupReplicas": 0}, "maxWarmupReplicas"),
        ({"maxWarmupReplicas": -3}, "maxWarmupReplicas"),
        ({"probingRebalanceIntervalMs": 999}, "probingRebalanceIntervalMs"),
        ({"acceptableRecoveryLag": "10000"}, "acceptableRecoveryLag"),
    ],
    ids=["negative-recovery-lag", "zero-warmups", "negative-warmups", "probing-below-1s", "lag-as-string"],
)
def test_assignor_settings_out_of_range_are_refused(changes: dict[str, Any], field: str) -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    with pytest.raises(jsonschema.ValidationError) as refused:
        jsonschema.validate(_with_spec(**changes), schema)
    assert list(refused.value.absolute_path) == ["spec", field]


def test_assignor_settings_at_their_minimums_are_accepted() -> None:
    schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    jsonschema.validate(
        _with_spec(acceptableRecoveryLag=0, maxWarmupReplicas=1, probingRebalanceIntervalMs=1000), schema
    )
