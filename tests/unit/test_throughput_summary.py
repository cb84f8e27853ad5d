"""bench/throughput.py's ``--repeat`` summary: each row is its median run, the ratios are the medians'."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.support.scripts import load_script

pytestmark = pytest.mark.unit

BENCH = Path(__file__).resolve().parents[2] / "bench" / "throughput.py"


@pytest.fixture(scope="module")
def throughput() -> ModuleType:
    return load_script("bench_throughput", BENCH)


def _run(guarantee: str, processes: int, rate: int, round_: int, *, exact: bool = True) -> dict[str, object]:
    return {
        "guarantee": guarantee,
        "processes": processes,
        "records_per_second": rate,
        "seconds": round_,  # tells the runs apart
        "exact": exact,
        "exit_code": 0,
        "round": round_,
    }


def test_rows_are_median_runs_and_ratios_are_of_the_medians(throughput: ModuleType) -> None:
    ceiling = throughput.CEILING
    results = [
        _run(ceiling, 1, 100, 1),
        _run(ceiling, 1, 120, 2),
        _run(ceiling, 1, 80, 3),
        _run("at_least_once", 1, 100, 1),
        _run("at_least_once", 1, 90, 2),
        _run("at_least_once", 1, 150, 3),
        _run("at_least_once", 2, 170, 1),
        _run("at_least_once", 2, 200, 2),
        _run("at_least_once", 2, 100, 3, exact=False),
    ]
    rows = throughput.summarize(results, [(ceiling, 1), ("at_least_once", 1), ("at_least_once", 2)])
    by = {(r["guarantee"], r["processes"]): r for r in rows}
    assert by[ceiling, 1]["records_per_second"] == 100 and by[ceiling, 1]["seconds"] == 1
    one, two = by["at_least_once", 1], by["at_least_once", 2]
    assert (one["records_per_second"], one["seconds"]) == (100, 1)  # the median run, whole
    assert (two["records_per_second"], two["seconds"]) == (170, 1)
    assert (two["min_records_per_second"], two["max_records_per_second"], two["runs"]) == (100, 200, 3)
    assert two["of_one_process"] == 1.7 and two["of_ceiling"] == 1.7
    assert not two["exact"]  # one wrong run makes the row wrong, even if the median run was exact
    assert one["exact"] and "round" not in one
