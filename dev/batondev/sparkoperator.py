"""A CustomResourceDefinition for the Spark Operator's ScheduledSparkApplication, for tests.

Baton renders a ``ScheduledSparkApplication`` (``sparkoperator.k8s.io/v1beta2``) under
``runner: SparkOperator``; the tests have the real API server check it with a server-side
dry run. The Spark Operator's own CRD files are not on any registry this project can reach
(its Go module is not served by the module proxy, its Helm chart and images live elsewhere).
What is published is the project's API as Python models, ``kubeflow-spark-api`` on PyPI,
generated from the same Go types the CRD is generated from. So this module turns those
models' JSON schema into a structural CRD schema, the way controller-gen turns the Go types
into the upstream CRD: ``$ref`` inlined, optional fields as ``nullable``, Kubernetes'
quantities and int-or-strings as ``x-kubernetes-int-or-string``, free-form maps as
``x-kubernetes-preserve-unknown-fields``, descriptions dropped (size).

With ``kubectl apply --dry-run=server --validate=strict`` the API server then refuses an
unknown or misspelled field, a wrong type or a missing required field, as it would with the
Spark Operator installed.
"""

from __future__ import annotations

from typing import Any

GROUP = "sparkoperator.k8s.io"
VERSION = "v1beta2"
KIND = "ScheduledSparkApplication"
PLURAL = "scheduledsparkapplications"
_INT_OR_STRING = {"IoK8sApimachineryPkgApiResourceQuantity", "IoK8sApimachineryPkgUtilIntstrIntOrString"}
_FREE = {"x-kubernetes-preserve-unknown-fields": True}


def _structural(node: dict[str, Any], defs: dict[str, Any], seen: tuple[str, ...]) -> dict[str, Any]:
    ref = node.get("$ref")
    if ref is not None:
        name = ref.rsplit("/", 1)[-1]
        if name in _INT_OR_STRING:
            return {"x-kubernetes-int-or-string": True}
        if name in seen:  # a recursive type: accept what is below it as is
            return {"type": "object", **_FREE}
        return _structural(defs[name], defs, (*seen, name))
    variants = [v for v in node.get("anyOf", []) if v.get("type") != "null"]
    if "anyOf" in node:
        if len(variants) != 1:
            return dict(_FREE)
        optional = _structural(variants[0], defs, seen)
        if len(variants) < len(node["anyOf"]):
            optional["nullable"] = True
        return optional
    kind = node.get("type")
    if kind == "object" or "properties" in node:
        props = node.get("properties")
        extra = node.get("additionalProperties")
        out: dict[str, Any] = {"type": "object"}
        if props:
            out["properties"] = {k: _structural(v, defs, seen) for k, v in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
        elif isinstance(extra, dict) and extra:
            out["additionalProperties"] = _structural(extra, defs, seen)
        else:
            out.update(_FREE)
        return out
    if kind == "array":
        return {"type": "array", "items": _structural(node.get("items") or {}, defs, seen)}
    if kind in ("string", "integer", "number", "boolean"):
        out = {"type": kind}
        if "enum" in node:
            out["enum"] = list(node["enum"])
        return out
    return dict(_FREE)  # Any


def crd() -> dict[str, Any]:
    """The ScheduledSparkApplication CRD, from the installed ``kubeflow-spark-api`` models."""
    from kubeflow_spark_api.models import SparkV1beta2ScheduledSparkApplication

    schema = SparkV1beta2ScheduledSparkApplication.model_json_schema(by_alias=True)
    root = _structural(schema, schema.get("$defs", {}), ())
    root["properties"]["metadata"] = {"type": "object"}  # a CRD may not constrain metadata
    root["properties"]["status"] = {"type": "object", **_FREE}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{PLURAL}.{GROUP}",
            # *.k8s.io groups are protected; the upstream CRD carries its approval here
            "annotations": {
                "api-approved.kubernetes.io": "unapproved, a test stand-in for the Spark Operator's CRD"
            },
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": KIND,
                "listKind": f"{KIND}List",
                "plural": PLURAL,
                "singular": KIND.lower(),
                "shortNames": ["scheduledsparkapp"],
            },
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": root},
                    "subresources": {"status": {}},
                }
            ],
        },
    }
