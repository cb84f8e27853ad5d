"""The short variants of ``bench/throughput.py`` and ``bench/cpu_profile.py``.

Throughput: the plain-Python ceilings and both of Baton's guarantees on the same small input,
each checked for exact final counts per user (the bench exits non-zero otherwise); at-least-once
commits every second here, not every 30 s, so a run does not wait half a minute for the commit
that ends it. The windowed and join topologies: Baton and Kafka Streams on one small input each,
one guarantee each, their outputs checked exact by the bench. Profile:
py-spy samples a worker and every sample of the processing thread lands in a stage. Times
and shares are printed and kept in the JSON; nothing here fails on a wall-clock threshold.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from batondev.paths import BENCH

pytestmark = pytest.mark.integration


def _run(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(
        [sys.executable, str(BENCH / script), *args],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_throughput_bench_counts_exactly_against_the_ceiling(kafka_bootstrap: str, tmp_path: Path) -> None:
    out = tmp_path / "throughput.json"
    proc = _run(
        "throughput.py",
        "--bootstrap",
        kafka_bootstrap,
        "--events",
        "20000",
        "--users",
        "500",
        "--json",
        str(out),
        "--processes",
        "1,2",
        "--alos-commit-ms",
        "1000",
    )
    report = json.loads(out.read_text())
    runs = {(r["guarantee"], r["processes"]): r for r in report["results"]}
    assert set(runs) == {
        ("plain loop (ceiling)", 1),
        ("plain loop, librdkafka fetch", 1),
        ("plain loop, 1 s flush", 1),
        ("plain loop (ceiling)", 2),
        ("at_least_once", 1),
        ("at_least_once", 2),
        ("exactly_once_v2", 1),
        ("exactly_once_v2", 2),
    }
    assert all(r["exact"] and r["events"] == 20000 and r["exit_code"] == 0 for r in runs.values()), runs
    assert runs[("plain loop (ceiling)", 1)]["of_ceiling"] == 1.0
    # the loop that writes each changed count once a second: Baton's rows are measured against it too
    assert runs[("plain loop, 1 s flush", 1)]["of_flushed"] == 1.0
    assert all(r["of_flushed"] > 0 for r in runs.values())
    assert "of 1 s loop" in proc.stdout and "the plain loop that flushes once a second" in proc.stdout
    # the ceiling in two processes is measured against the ceiling in one, as Baton's rows are
    pair = runs[("plain loop (ceiling)", 2)]
    assert pair["of_one_process"] == pair["of_ceiling"] > 0, pair
    assert runs[("at_least_once", 1)]["of_one_process"] == 1.0
    assert all(r["of_ceiling"] > 0 for r in runs.values())
    # exactly-once commits every 100 ms: its processing threads spent some of the run committing
    assert all(0 < runs[("exactly_once_v2", n)]["in_commit"] < 1 for n in (1, 2)), runs
    assert "of ceiling" in proc.stdout and "of 1 proc" in proc.stdout and "in commit" in proc.stdout
    # the cores in use while the ceiling loop ran, read from /proc: the loop's own at least
    ceiling = runs[("plain loop (ceiling)", 1)]
    assert ceiling["busy_cores"] > 0 and ceiling["broker_cores"] >= 0, ceiling
    assert "cores" in proc.stdout and "broker" in proc.stdout
    # the app's own CPU: each plain loop's process, summed; a pod's whole process tree. The
    # loops sample at their first record and after their last flush, so they spent some. A
    # worker's run may fit in one poll of its counter: then it has no CPU columns at all
    columns = {"busy_cores", "broker_cores", "app_cores", "app_us_per_record"}
    assert all(columns <= r.keys() or not columns & r.keys() for r in runs.values()), runs
    assert all(
        r["app_cores"] > 0 and r["app_us_per_record"] > 0 for r in runs.values() if "loop" in r["guarantee"]
    ), runs
    assert "app µs/rec" in proc.stdout


@pytest.mark.parametrize(
    ("topology", "guarantee"), [("windowed", "exactly_once_v2"), ("join", "at_least_once")]
)
def test_throughput_bench_runs_a_topology_on_baton_and_kafka_streams_exactly(
    kafka_bootstrap: str, tmp_path: Path, topology: str, guarantee: str
) -> None:
    """Both systems on the same input in one invocation, their outputs exact (the bench checks),
    timed by the same counter. One guarantee each, to keep CI short: the windowed topology's
    repartition under transactions, the join's table under at-least-once."""
    out = tmp_path / f"{topology}.json"
    proc = _run(
        "throughput.py",
        "--bootstrap",
        kafka_bootstrap,
        "--topology",
        topology,
        "--events",
        "4000",
        "--users",
        "600",
        "--pages",
        "120",
        "--guarantees",
        guarantee,
        "--json",
        str(out),
    )
    report = json.loads(out.read_text())
    runs = {r["system"]: r for r in report["results"]}
    assert set(runs) == {"baton", "kstreams"}, runs
    for r in runs.values():
        assert r["exact"] and r["exit_code"] == 0 and r["late_dropped"] == 0, r
        assert r["guarantee"] == guarantee and r["events"] == 4000 and r["output_records"] > 0, r
        assert r["records_per_second"] > 0 and r["peak_rss_mb"] > 0, r
    assert runs["kstreams"]["of_kstreams"] == 1.0 and runs["baton"]["of_kstreams"] > 0
    assert report["versions"]["kafka-streams"] == "4.3.1"
    if topology == "windowed":
        # the latest count of every (page, window) was checked: there is one per window
        assert runs["baton"]["output_records"] >= report["page_windows"] > 0
    else:  # every click of a user in the table, once
        assert runs["baton"]["output_records"] == runs["kstreams"]["output_records"] < 4000
    assert f"{guarantee}: Baton" in proc.stdout and "Kafka Streams" in proc.stdout


def test_profile_bench_charges_every_sample_to_a_stage(kafka_bootstrap: str, tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    _run(
        "cpu_profile.py",
        "--bootstrap",
        kafka_bootstrap,
        "--events",
        "50000",
        "--users",
        "500",
        "--json",
        str(out),
    )
    report = json.loads(out.read_text())
    assert report["samples"] > 0
    assert abs(sum(report["stages"].values()) - 100) < 1, report["stages"]
    assert any(name.startswith("deserialize") for name in report["stages"]), report["stages"]


def test_in_process_bench_counts_the_instructions_a_record_costs(tmp_path: Path) -> None:
    """The instruction count two checkouts compare by (docs/benchmarks.md, "Instructions, where
    time cannot tell"): valgrind's, of the worker as it runs and of the general path it stands in
    for. It is deterministic, so the fused loop's saving is asserted, not just printed."""
    out = tmp_path / "in-process.json"
    _run(
        "cpu_profile.py",
        "in-process",
        *("--topology", "click-counter", "--paths", "fast,general"),
        *("--records", "2000", "--repeat", "1", "--profile-records", "2000"),
        *("--instructions", "--instruction-records", "6000", "--json", str(out)),
    )
    rows = json.loads(out.read_text())["click-counter"]
    fast, general = rows["fast"]["instructions_per_record"], rows["general"]["instructions_per_record"]
    assert 1_000 < fast < general, rows
