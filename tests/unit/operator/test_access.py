"""The operator's start-up check of its RBAC per watched namespace (pure half)."""

from __future__ import annotations

import pytest

from baton.operator.access import missing, refusal
from baton.operator.core import rbac

pytestmark = pytest.mark.unit


def test_the_chart_role_covers_what_the_operator_needs_and_less_does_not() -> None:
    needed = rbac.namespaced_rules()
    assert missing(needed, needed) == []
    assert missing([{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}], needed) == []
    without_statefulsets = [r for r in needed if "statefulsets" not in r["resources"]]
    lacking = missing(without_statefulsets, needed)
    assert "create statefulsets.apps" in lacking and all("statefulsets" in m for m in lacking)
    assert "list pods" in missing([], needed)  # the core group has no suffix


def test_the_refusal_names_the_namespace_and_the_fix() -> None:
    text = refusal({"c": ["get streamapps.baton.dev", "a", "b", "d", "e"], "d": ["list pods"]})
    assert (
        "namespace(s) c (it may not get streamapps.baton.dev, a, b, d and more); d (it may not list pods)"
        in text
    )
    assert "operator.watchNamespaces" in text
