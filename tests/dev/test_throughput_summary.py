"""bench/throughput.py's ``--repeat`` summaries: each row is its median run, the ratios are the
medians' (the click counter's against the plain loops, ``--topology windowed|join``'s against
Kafka Streams)."""

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
    ceiling, flushed = throughput.CEILING, throughput.FLUSHED
    results = [
        _run(ceiling, 1, 100, 1),
        _run(ceiling, 1, 120, 2),
        _run(ceiling, 1, 80, 3),
        _run(flushed, 1, 200, 1),
        _run(flushed, 1, 260, 2),
        _run(flushed, 1, 250, 3),
        _run("at_least_once", 1, 100, 1),
        _run("at_least_once", 1, 90, 2),
        _run("at_least_once", 1, 150, 3),
        _run("at_least_once", 2, 170, 1),
        _run("at_least_once", 2, 200, 2),
        _run("at_least_once", 2, 100, 3, exact=False),
    ]
    runs = [(ceiling, 1), (flushed, 1), ("at_least_once", 1), ("at_least_once", 2)]
    rows = throughput.summarize(results, runs)
    by = {(r["guarantee"], r["processes"]): r for r in rows}
    assert by[ceiling, 1]["records_per_second"] == 100 and by[ceiling, 1]["seconds"] == 1
    assert by[flushed, 1]["records_per_second"] == 250 and by[flushed, 1]["seconds"] == 3
    one, two = by["at_least_once", 1], by["at_least_once", 2]
    assert (one["records_per_second"], one["seconds"]) == (100, 1)  # the median run, whole
    assert (two["records_per_second"], two["seconds"]) == (170, 1)
    assert (two["min_records_per_second"], two["max_records_per_second"], two["runs"]) == (100, 200, 3)
    assert two["of_one_process"] == 1.7 and two["of_ceiling"] == 1.7
    # the 1 s loop is a second measure: every row's ratio to its median run (250/s)
    assert (one["of_flushed"], two["of_flushed"], by[flushed, 1]["of_flushed"]) == (0.4, 0.68, 1.0)
    assert by[flushed, 1]["of_ceiling"] == 2.5
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


def _compared(
    system: str, guarantee: str, rate: int, us: float, round_: int, *, exact: bool = True
) -> dict[str, object]:
    return {
        "system": system,
        "guarantee": guarantee,
        "round": round_,
        "events": 1000,
        "seconds": round_,  # tells the runs apart
        "records_per_second": rate,
        "app_us_per_record": us,
        "peak_rss_mb": 100.0,
        "late_dropped": 0,
        "exact": exact,
        "exit_code": 0,
    }


def test_the_kafka_streams_comparison_rows_are_median_runs_with_their_ranges() -> None:
    """``--topology windowed|join``: a row per (system, guarantee) is its median run, with the range
    of records/s and of CPU per record, and Baton's ratio is of the two systems' medians."""
    from bench.topologies import compare

    results = [
        _compared("baton", "at_least_once", 120, 8.0, 1),
        _compared("baton", "at_least_once", 160, 6.5, 2),
        _compared("baton", "at_least_once", 110, 9.0, 3, exact=False),
        _compared("kstreams", "at_least_once", 80, 19.0, 1),
        _compared("kstreams", "at_least_once", 70, 20.0, 2),
        _compared("kstreams", "at_least_once", 85, 17.5, 3),
        _compared("baton", "exactly_once_v2", 90, 10.0, 1),  # no Kafka Streams run to compare with
    ]
    runs = [("baton", "at_least_once"), ("kstreams", "at_least_once"), ("baton", "exactly_once_v2")]
    rows = compare.summarize(results, runs)
    by = {(r["system"], r["guarantee"]): r for r in rows}
    baton, ks = by["baton", "at_least_once"], by["kstreams", "at_least_once"]
    assert (baton["records_per_second"], baton["seconds"], baton["app_us_per_record"]) == (120, 1, 8.0)
    assert (baton["min_records_per_second"], baton["max_records_per_second"], baton["runs"]) == (110, 160, 3)
    assert baton["us_per_record_range"] == [6.5, 9.0] and ks["us_per_record_range"] == [17.5, 20.0]
    assert (ks["records_per_second"], ks["seconds"]) == (80, 1)
    assert baton["of_kstreams"] == 1.5 and ks["of_kstreams"] == 1.0
    assert not baton["exact"] and ks["exact"]  # one wrong run makes the row wrong
    assert "of_kstreams" not in by["baton", "exactly_once_v2"] and "round" not in baton
    baton_line, ks_line = compare.table(rows, repeat=3).splitlines()[1:3]
    assert baton_line.startswith("Baton") and baton_line.endswith("NO  3: 110-160; 6.5-9.0")
    assert ks_line.startswith("Kafka Streams") and ks_line.endswith("yes  3: 70-85; 17.5-20.0")
