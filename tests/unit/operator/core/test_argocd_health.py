"""The Argo CD health check and resource actions of StreamApp, run by a real Lua 5.1 interpreter.

Argo CD runs these scripts in gopher-lua (Lua 5.1); lupa's lua51 runtime is the same
language. The fixtures use Argo's own layout (health_test.yaml, actions/action_test.yaml,
testdata/), so the folder can be contributed to Argo CD's resource_customizations as is.
Each script runs in a sandbox with only the globals Argo CD offers, with ``os.date`` fixed.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from batondev.paths import EXAMPLE, REPO
from lupa import lua51

from baton.operator.core.builders.statefulset import spec_hash, statefulset
from baton.operator.core.spec import StreamApp
from baton.operator.core.status import Observed, compute_status

DIR = REPO / "argocd" / "resource_customizations" / "baton.dev" / "StreamApp"
NOW = "2026-11-22T09:30:00Z"

pytestmark = pytest.mark.unit

_SANDBOX = """
local script, obj, now = ...
local env = {
  ipairs = ipairs, pairs = pairs, next = next, tostring = tostring, tonumber = tonumber,
  type = type, error = error, pcall = pcall, select = select, unpack = unpack,
  string = string, table = table, math = math,
  os = {date = function() return now end, time = os.time, clock = os.clock},
  obj = obj,
}
local fn = assert(loadstring(script))
setfenv(fn, env)
return fn()
"""


def _to_lua(lua: Any, value: Any) -> Any:
    if isinstance(value, dict):
        return lua.table_from({k: _to_lua(lua, v) for k, v in value.items()})
    if isinstance(value, list):
        return lua.table_from([_to_lua(lua, v) for v in value])
    return value


def _from_lua(value: Any) -> Any:
    if lua51.lua_type(value) != "table":
        return value
    items = dict(value.items())
    if items and all(isinstance(k, int) for k in items) and sorted(items) == list(range(1, len(items) + 1)):
        return [_from_lua(items[i]) for i in range(1, len(items) + 1)]
    return {k: _from_lua(v) for k, v in items.items()}


def run_lua(script: Path, obj: dict[str, Any]) -> Any:
    """Run an Argo CD Lua script on ``obj``; returns its result as Python data."""
    lua = lua51.LuaRuntime(unpack_returned_tuples=False)
    sandboxed = lua.execute(f"return function(...) {_SANDBOX} end")
    return _from_lua(sandboxed(script.read_text(), _to_lua(lua, obj), NOW))


def load(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


HEALTH_TESTS = load(DIR / "health_test.yaml")["tests"]
ACTION_TESTS = load(DIR / "actions" / "action_test.yaml")


def test_fixtures_cover_all_five_health_states() -> None:
    states = {t["healthStatus"]["status"] for t in HEALTH_TESTS}
    assert states == {"Healthy", "Progressing", "Degraded", "Suspended", "Unknown"}
    used = {t["inputPath"] for t in HEALTH_TESTS}
    assert used == {f"testdata/{p.name}" for p in (DIR / "testdata").glob("*.yaml")}, (
        "every fixture is tested"
    )


@pytest.mark.parametrize("case", HEALTH_TESTS, ids=lambda t: Path(t["inputPath"]).stem)
def test_health_fixture(case: dict[str, Any]) -> None:
    got = run_lua(DIR / "health.lua", load(DIR / case["inputPath"]))
    assert got == case["healthStatus"]


@pytest.mark.parametrize("case", ACTION_TESTS["discoveryTests"], ids=lambda t: Path(t["inputPath"]).stem)
def test_action_discovery(case: dict[str, Any]) -> None:
    got = run_lua(DIR / "actions" / "discovery.lua", load(DIR / "actions" / case["inputPath"]))
    assert {name: a["disabled"] for name, a in got.items()} == {
        r["name"]: r["disabled"] for r in case["result"]
    }
    assert all(a["iconClass"].startswith("fa ") for a in got.values())


@pytest.mark.parametrize("case", ACTION_TESTS["actionTests"], ids=lambda t: str(t["action"]))
def test_action(case: dict[str, Any]) -> None:
    action = DIR / "actions" / case["action"] / "action.lua"
    got = run_lua(action, load(DIR / "actions" / case["inputPath"]))
    assert got == load(DIR / "actions" / case["expectedOutputPath"])


def test_every_action_has_a_script_and_a_test() -> None:
    scripts = {p.parent.name for p in (DIR / "actions").glob("*/action.lua")}
    assert scripts == {"flip", "rollback", "pause", "resume"}
    assert {t["action"] for t in ACTION_TESTS["actionTests"]} == scripts


# The same script against statuses the operator's own code computes (not hand-written ones),
# so a change in baton/operator/core/status.py that Argo CD would misread fails here.


def _app(**spec: Any) -> StreamApp:
    body = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"].update(namespace="apps", uid="u-1", generation=2)
    body["spec"].update(spec)
    return StreamApp.from_body(body)


def _sts(app: StreamApp, color: str, ready: int) -> dict[str, Any]:
    sts = statefulset(app, color)  # type: ignore[arg-type]
    sts["metadata"]["generation"] = 1
    sts["status"] = {
        "observedGeneration": 1,
        "replicas": app.spec.replicas,
        "readyReplicas": ready,
        "updatedReplicas": app.spec.replicas,
        "currentRevision": "r1",
        "updateRevision": "r1",
    }
    return sts


@pytest.mark.parametrize(
    ("paused", "ready", "error", "want"),
    [
        (False, (3, 3), None, "Healthy"),
        (False, (1, 3), None, "Progressing"),
        (False, (3, 1), None, "Healthy"),  # the standby's upgrade after a flip
        (False, (3, 3), "StatefulSet is invalid", "Degraded"),
        (False, (3, 0), "crash", "Degraded"),  # the standby crash-loops
        (True, (3, 3), None, "Suspended"),
    ],
)
def test_health_of_statuses_the_operator_computes(
    paused: bool, ready: tuple[int, int], error: str | None, want: str
) -> None:
    app = _app(paused=paused)
    failing = {"green": "Pod x-green-0 container worker CrashLoopBackOff"} if error == "crash" else {}
    observed = Observed(
        statefulsets={c: _sts(app, c, n) for c, n in zip(app.colors, ready, strict=True)},
        error=None if error == "crash" else error,
        failing=failing,  # type: ignore[arg-type]
    )
    status = compute_status(app, observed, spec_hash(app.spec), now=datetime.datetime(2026, 11, 22))
    body = {
        "apiVersion": "baton.dev/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": app.name, "generation": 2},
        "spec": {"paused": paused},
        "status": status,
    }
    assert run_lua(DIR / "health.lua", body)["status"] == want
