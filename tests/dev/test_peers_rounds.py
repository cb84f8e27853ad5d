"""bench/peers/run.py's ``--repeat``: the order of the rounds and the run each table row shows."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.support.scripts import load_script

pytestmark = pytest.mark.unit

RUN = Path(__file__).resolve().parents[2] / "bench" / "peers" / "run.py"


@pytest.fixture(scope="module")
def peers() -> ModuleType:
    return load_script("bench_peers_run", RUN)


def _run(peers: ModuleType, system: str, rate: int | None, round_: int, *, ok: bool = True) -> object:
    numbers = {
        "records_per_second": rate,
        "peak_rss_mb": round_,  # tells the rows' runs apart
        "cpu_seconds": 1.0,
        "changelog_records": 10,
        "restore_seconds": 1.0,
    }
    problems = [] if ok else ["exited with 1 after 0 records"]
    return peers.RunResult(system, "exactly_once", ok=ok, problems=problems, numbers=numbers, round=round_)


def test_each_round_starts_with_another_system_and_every_system_runs_once_a_round(peers: ModuleType) -> None:
    systems = [peers.SYSTEMS[name] for name in ("baton", "quix", "kstreams")]
    plan = [(g, r, s.name) for g, r, s in peers.schedule(["at_least_once", "exactly_once"], systems, 4)]
    assert len(plan) == 2 * 4 * 3
    for guarantee in ("at_least_once", "exactly_once"):
        rounds = [[s for g, r, s in plan if g == guarantee and r == n] for n in range(1, 5)]
        assert [order[0] for order in rounds] == ["baton", "quix", "kstreams", "baton"]
        assert all(sorted(order) == ["baton", "kstreams", "quix"] for order in rounds)
    assert [g for g, _r, _s in plan] == ["at_least_once"] * 12 + ["exactly_once"] * 12


def test_one_round_is_the_old_order(peers: ModuleType) -> None:
    systems = [peers.SYSTEMS[name] for name in ("baton", "quix", "faust", "kstreams")]
    assert [s.name for _g, _r, s in peers.schedule(["exactly_once"], systems, 1)] == [
        "baton",
        "quix",
        "faust",
        "kstreams",
    ]


def test_a_row_shows_the_median_run_whole_and_the_range(peers: ModuleType) -> None:
    runs = [
        _run(peers, "baton", 90_000, 1),
        _run(peers, "baton", 70_000, 2),
        _run(peers, "baton", 110_000, 3),
        _run(peers, "kstreams", 60_000, 1),
        _run(peers, "kstreams", 80_000, 2),
    ]
    assert peers.median_run(runs[:3]).round == 1
    assert peers.median_run(runs[3:]).round == 1  # even: the lower middle run, never an average
    text = peers.table(runs, {"baton": "Baton", "kstreams": "Kafka Streams"})
    baton_row = next(line for line in text.splitlines() if line.startswith("| Baton |"))
    ks_row = next(line for line in text.splitlines() if line.startswith("| Kafka Streams |"))
    assert "| 90,000 | 1.00x | 3 (70,000-110,000) | 1 |" in baton_row
    assert "| 60,000 | 0.67x | 2 (60,000-80,000) | 1 |" in ks_row


def test_a_failed_run_is_not_the_median_but_the_row_says_it_failed(peers: ModuleType) -> None:
    runs = [
        _run(peers, "baton", 90_000, 1),
        _run(peers, "baton", None, 2, ok=False),
        _run(peers, "baton", 100_000, 3),
    ]
    assert peers.median_run(runs).round == 1
    row = peers.table(runs, {"baton": "Baton"}).splitlines()[-1]
    assert "| 90,000 |" in row
    assert "1 of 3 runs WRONG: exited with 1" in row


def test_a_row_whose_every_run_failed_shows_the_failure(peers: ModuleType) -> None:
    runs = [_run(peers, "baton", None, 1, ok=False), _run(peers, "baton", None, 2, ok=False)]
    row = peers.table(runs, {"baton": "Baton"}).splitlines()[-1]
    assert row.startswith("| Baton | exactly_once | - | - | 2 |")
    assert "WRONG: exited with 1" in row
