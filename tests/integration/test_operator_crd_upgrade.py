"""`baton operator --manage-crd`: the leader brings an older StreamApp CRD to its own version at
start (what makes `helm upgrade` upgrade the CRD), and leaves a newer one alone."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from baton import __version__
from baton.operator.crd import VERSION_ANNOTATION, bundled
from tests.support.operator import KubectlFn, apply, get_json, install_crds

pytestmark = pytest.mark.integration


def _crd(kubectl: KubectlFn) -> dict[str, Any]:
    return dict(get_json(kubectl, "crd", "streamapps.baton.dev"))


def _spec_fields(crd: dict[str, Any]) -> set[str]:
    return set(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"])


def _variant(version: str, drop: str | None = None, add: str | None = None) -> dict[str, Any]:
    crd = bundled()
    crd["metadata"]["annotations"][VERSION_ANNOTATION] = version
    fields = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
    if drop:
        del fields[drop]
    if add:
        fields[add] = {"type": "string", "description": "A field of a later Baton."}
    return crd


def test_the_leader_upgrades_an_older_crd_and_leaves_a_newer_one(
    crd_lock: None, kubectl: KubectlFn, operator: Callable[..., Any]
) -> None:
    install_crds(kubectl)
    try:
        # an older Baton's CRD (no spec.paused yet): upgraded at start, field and version back
        apply(kubectl, _variant("0.0.1", drop="paused"))
        assert "paused" not in _spec_fields(_crd(kubectl))
        old = operator("--manage-crd", name="upgrades")
        old.wait_log(rf"CRD streamapps.baton.dev upgraded from 0.0.1 to {__version__}")
        crd = _crd(kubectl)
        assert crd["metadata"]["annotations"][VERSION_ANNOTATION] == __version__
        assert _spec_fields(crd) == _spec_fields(bundled())
        old.kill()

        # a newer Baton's CRD (a rollback of the operator): left as it is, and said so
        apply(kubectl, _variant("99.0.0", add="futureField"))
        newer = operator("--manage-crd", name="leaves")
        newer.wait_log(r"CRD streamapps.baton.dev is at 99.0.0, newer than this operator")
        assert "futureField" in _spec_fields(_crd(kubectl))
        newer.kill()

        # at its own version: nothing to do
        install_crds(kubectl)
        same = operator("--manage-crd", name="same")
        same.wait_log(rf"CRD streamapps.baton.dev is at this operator's version {__version__}")
    finally:
        install_crds(kubectl)
