"""A container's environment as the kubelet builds it, from the Pod object alone.

Pure: Secrets and ConfigMaps come through a ``Lookup`` callable, so the rules (order,
``envFrom`` prefixes, ``$(VAR)`` expansion, downward API fields, optional references) are
unit tested without a server. The kubelet's order: ``envFrom`` sources first, then
``env`` entries, each value expanded against the variables defined before it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

POD_IP = "127.0.0.1"

# kind ("Secret" or "ConfigMap"), namespace, name -> decoded data, or None when it does not exist
Lookup = Callable[[str, str, str], Mapping[str, str] | None]

_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_LABEL_REF = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")
_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 1000),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
    "Ki": Fraction(2**10),
    "Mi": Fraction(2**20),
    "Gi": Fraction(2**30),
    "Ti": Fraction(2**40),
    "Pi": Fraction(2**50),
    "Ei": Fraction(2**60),
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+)(?:[eE]([+-]?[0-9]+))?([a-zA-Z]*)$")


class ConfigError(Exception):
    """The env refers to something missing; the kubelet reports CreateContainerConfigError and retries."""


@dataclass(frozen=True)
class NodeResources:
    """What ``resourceFieldRef`` reports for a limit the container does not set (node allocatable)."""

    cpu: str = "1"
    memory: str = "1Gi"
    ephemeral_storage: str = "10Gi"


def parse_quantity(text: str) -> Fraction:
    """A Kubernetes quantity (``250m``, ``1Gi``, ``1e3``) as an exact fraction."""
    match = _QUANTITY.match(str(text).strip())
    if not match or match.group(3) not in _SUFFIXES:
        raise ValueError(f"not a quantity: {text!r}")
    number, exponent, suffix = match.groups()
    value = Fraction(number) * _SUFFIXES[suffix]
    if exponent:
        value *= Fraction(10) ** int(exponent)
    return value


def expand(value: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion: defined names are replaced, ``$$`` escapes, the rest stays."""
    out: list[str] = []
    i = 0
    while i < len(value):
        char = value[i]
        if char == "$" and i + 1 < len(value):
            nxt = value[i + 1]
            if nxt == "$":
                out.append("$")
                i += 2
                continue
            if nxt == "(":
                end = value.find(")", i + 2)
                if end != -1:
                    name = value[i + 2 : end]
                    out.append(env[name] if name in env else value[i : end + 1])
                    i = end + 1
                    continue
        out.append(char)
        i += 1
    return "".join(out)


def field_value(pod: Mapping[str, Any], path: str) -> str:
    """A downward API ``fieldRef``; the Pod's IP and its host's IP are both 127.0.0.1 here."""
    meta = pod.get("metadata", {})
    spec = pod.get("spec", {})
    match = _LABEL_REF.match(path)
    if match:
        return str((meta.get(match.group(1)) or {}).get(match.group(2), ""))
    simple: dict[str, Any] = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName", "default"),
        "status.podIP": POD_IP,
        "status.podIPs": POD_IP,
        "status.hostIP": POD_IP,
        "status.hostIPs": POD_IP,
    }
    if path not in simple:
        raise ConfigError(f"unsupported fieldRef {path!r}")
    return str(simple[path] or "")


def resource_value(
    pod: Mapping[str, Any], container: Mapping[str, Any], ref: Mapping[str, Any], node: NodeResources
) -> str:
    """A ``resourceFieldRef``: the limit or request divided by the divisor, rounded up like the kubelet."""
    target = container
    if ref.get("containerName"):
        matches = [c for c in pod["spec"]["containers"] if c["name"] == ref["containerName"]]
        if not matches:
            raise ConfigError(f"resourceFieldRef: no container {ref['containerName']!r}")
        target = matches[0]
    kind, _, resource = str(ref["resource"]).partition(".")
    resources = target.get("resources") or {}
    fallback = {"cpu": node.cpu, "memory": node.memory, "ephemeral-storage": node.ephemeral_storage}
    raw = (resources.get(kind) or {}).get(resource)
    if raw is None and kind == "requests":
        raw = (resources.get("limits") or {}).get(resource)  # requests default to limits
    if raw is None:
        raw = fallback.get(resource, "0")
    divisor = parse_quantity(str(ref.get("divisor") or "1"))
    return str(math.ceil(parse_quantity(str(raw)) / divisor))


def _source(lookup: Lookup, kind: str, namespace: str, ref: Mapping[str, Any]) -> Mapping[str, str] | None:
    data = lookup(kind, namespace, ref["name"])
    if data is None and not ref.get("optional"):
        raise ConfigError(f"{kind.lower()} {ref['name']!r} not found")
    return data


def resolve_env(
    pod: Mapping[str, Any],
    container: Mapping[str, Any],
    lookup: Lookup,
    node: NodeResources | None = None,
) -> dict[str, str]:
    """The container's env, in the kubelet's order, with every reference resolved."""
    node = node or NodeResources()
    namespace = pod["metadata"]["namespace"]
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix") or ""
        for key, kind in (("configMapRef", "ConfigMap"), ("secretRef", "Secret")):
            if key in source:
                found = _source(lookup, kind, namespace, source[key]) or {}
                for name, value in found.items():
                    if _ENV_NAME.match(prefix + name):  # the kubelet skips invalid names
                        env[prefix + name] = value
    for var in container.get("env") or []:
        name = var["name"]
        if "valueFrom" not in var:
            env[name] = expand(str(var.get("value") or ""), env)
            continue
        ref = var["valueFrom"]
        if "fieldRef" in ref:
            env[name] = field_value(pod, ref["fieldRef"]["fieldPath"])
        elif "resourceFieldRef" in ref:
            env[name] = resource_value(pod, container, ref["resourceFieldRef"], node)
        else:
            key, kind = (
                ("secretKeyRef", "Secret") if "secretKeyRef" in ref else ("configMapKeyRef", "ConfigMap")
            )
            if key not in ref:
                raise ConfigError(f"env {name}: unsupported valueFrom {sorted(ref)}")
            data = _source(lookup, kind, namespace, ref[key])
            if data is None:
                continue
            if ref[key]["key"] not in data:
                if ref[key].get("optional"):
                    continue
                raise ConfigError(f"{kind.lower()} {ref[key]['name']!r} has no key {ref[key]['key']!r}")
            env[name] = data[ref[key]["key"]]
    return env


def expand_all(values: list[str], env: Mapping[str, str]) -> list[str]:
    """``command`` and ``args`` get the same ``$(VAR)`` expansion against the final env."""
    return [expand(v, env) for v in values]
