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


def test_cores_split_a_rate_into_the_apps_cores_and_its_cpu_per_record(throughput: ModuleType) -> None:
    """records/s = app cores ÷ app CPU per record: the two factors of a two-process ratio."""
    cpu = {
        "busy_first": 100.0,
        "busy_last": 119.0,  # 19 CPU-seconds of the machine over 10 s
        "broker_first": 50.0,
        "broker_last": 52.0,
        "app_first": 7.0,
        "app_last": 23.0,  # 16 CPU-seconds of the app's processes
    }
    cores = throughput._cores(cpu, 10.0, 4_000_000)
    assert cores == {"busy_cores": 1.9, "broker_cores": 0.2, "app_cores": 1.6, "app_us_per_record": 4.0}
    assert cores["app_cores"] / cores["app_us_per_record"] * 1e6 == pytest.approx(4_000_000 / 10.0)
    assert throughput._cores({}, 10.0, 4_000_000) == {}  # a broker not the local stack's: nothing read
