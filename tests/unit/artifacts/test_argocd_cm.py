"""argocd/argocd-cm-patch.yaml embeds exactly the Lua sources, and the example Application is sane."""

from __future__ import annotations

from types import ModuleType

import pytest
import yaml
from batondev.paths import REPO

from tests.support.scripts import load_script

pytestmark = pytest.mark.unit


def _gen() -> ModuleType:
    return load_script("argocd_gen_cm", REPO / "argocd" / "gen_cm.py")


def test_configmap_patch_is_current() -> None:
    gen = _gen()
    assert gen.PATCH.read_text() == gen.render(), "stale: run `python argocd/gen_cm.py`"


def test_configmap_patch_round_trips_the_lua() -> None:
    gen = _gen()
    data = yaml.safe_load(gen.PATCH.read_text())["data"]
    assert (
        data["resource.customizations.health.baton.dev_StreamApp"] == (gen.SOURCE / "health.lua").read_text()
    )
    actions = yaml.safe_load(data["resource.customizations.actions.baton.dev_StreamApp"])
    assert actions["discovery.lua"] == (gen.SOURCE / "actions" / "discovery.lua").read_text()
    assert [d["name"] for d in actions["definitions"]] == ["flip", "rollback", "pause", "resume"]
    for d in actions["definitions"]:
        assert d["action.lua"] == (gen.SOURCE / "actions" / d["name"] / "action.lua").read_text()


def test_example_application() -> None:
    app = yaml.safe_load((REPO / "examples" / "argocd-application.yaml").read_text())
    assert app["apiVersion"] == "argoproj.io/v1alpha1" and app["kind"] == "Application"
    spec = app["spec"]
    assert spec["source"]["path"] == "examples"
    include = spec["source"]["directory"]["include"]
    assert (REPO / "examples" / include).exists(), "only the StreamApp, not this Application itself"
    assert yaml.safe_load((REPO / "examples" / include).read_text())["kind"] == "StreamApp"
    # Actions write annotations and spec.paused on the live object: self-heal must not undo them.
    pointers = {p for d in spec["ignoreDifferences"] for p in d.get("jsonPointers", [])}
    assert "/spec/paused" in pointers
    assert "ServerSideApply=true" in spec["syncPolicy"]["syncOptions"]
