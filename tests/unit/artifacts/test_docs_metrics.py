"""docs/reference/metrics.md is generated from the code; docs, the dashboard and the alerts
name only metrics that exist."""

from __future__ import annotations

import re
from types import ModuleType

import pytest
from batondev.paths import REPO

from tests.support.scripts import load_script

pytestmark = pytest.mark.unit

METRIC = re.compile(r"\bbaton_[a-z][a-z0-9_]*")
# `baton_` words in docs that are not metrics (the package, a benchmark's file)
NOT_METRICS = {"baton_streams", "baton_app"}


def _gen() -> ModuleType:
    return load_script("docs_gen_metrics", REPO / "docs" / "gen_metrics.py")


def _exposed() -> set[str]:
    return {name for family in _gen().families() for name in family.exposed()}


def test_the_metrics_reference_is_current() -> None:
    gen = _gen()
    assert gen.OUT.read_text() == gen.render(), (
        "docs/reference/metrics.md is stale: run `python docs/gen_metrics.py`"
    )


def test_every_metric_is_in_the_reference_once() -> None:
    names = [f.name for f in _gen().families()]
    assert len(names) == len(set(names)), sorted(n for n in names if names.count(n) > 1)
    assert len(names) >= 40  # the worker's, the pod's, the operator's and the job's


@pytest.mark.parametrize(
    "path",
    [
        *sorted(p.relative_to(REPO).as_posix() for p in (REPO / "docs").rglob("*.md")),
        "README.md",
        "charts/baton/files/grafana-dashboard.json",
        "charts/baton/files/prometheus-rules.yaml",
    ],
)
def test_what_the_docs_dashboard_and_alerts_name_exists(path: str) -> None:
    exposed = _exposed()
    named = set(METRIC.findall((REPO / path).read_text())) - NOT_METRICS
    # a name ending in `_` is a family of names (`baton_compaction_*`): some must start with it
    unknown = sorted(
        n
        for n in named
        if n not in exposed and not (n.endswith("_") and any(e.startswith(n) for e in exposed))
    )
    assert not unknown, f"{path} names metrics the code does not export: {unknown}"
