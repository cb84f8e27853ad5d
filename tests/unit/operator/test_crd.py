"""The CRD upgrade decision (pure): apply an older or unmarked CRD, never a newer one."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from batondev.paths import REPO

from baton import __version__
from baton.operator.crd import VERSION_ANNOTATION, bundled, decide

pytestmark = pytest.mark.unit


def _marked(version: str | None) -> dict[str, Any]:
    annotations = {VERSION_ANNOTATION: version} if version is not None else {}
    return {"metadata": {"name": "streamapps.baton.dev", "annotations": annotations}}


@pytest.mark.parametrize(
    ("installed", "decision"),
    [
        (None, "unmarked"),
        ("0.0.9", "apply"),
        ("0.1.0rc1", "apply"),
        ("not a version", "apply"),
        (__version__, "current"),
        ("99.0.0", "newer"),
    ],
)
def test_decide(installed: str | None, decision: str) -> None:
    own = _marked(__version__)
    assert decide(_marked(installed), own) == ("apply" if decision == "unmarked" else decision)


def test_a_missing_crd_is_reported_not_created() -> None:
    assert decide(None, _marked(__version__)) == "missing"


def test_the_package_carries_the_crd_of_crds_at_the_package_version() -> None:
    source = (REPO / "crds" / "streamapps.baton.dev.yaml").read_text()
    assert bundled() == yaml.safe_load(source), "stale: run `python docs/gen_reference.py`"
    assert bundled()["metadata"]["annotations"][VERSION_ANNOTATION] == __version__
