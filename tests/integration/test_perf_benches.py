"""The short variants of ``bench/throughput.py`` and ``bench/cpu_profile.py``.

Throughput: the plain-Python ceiling and both of Baton's guarantees on the same small input,
each checked for exact final counts per user (the bench exits non-zero otherwise). Profile:
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
    )
    report = json.loads(out.read_text())
    runs = {(r["guarantee"], r["processes"]): r for r in report["results"]}
    assert set(runs) == {
        ("plain loop (ceiling)", 1),
        ("plain loop, librdkafka fetch", 1),
        ("plain loop (ceiling)", 2),
        ("at_least_once", 1),
        ("at_least_once", 2),
        ("exactly_once_v2", 1),
        ("exactly_once_v2", 2),
    }
    assert all(r["exact"] and r["events"] == 20000 and r["exit_code"] == 0 for r in runs.values()), runs
    assert runs[("plain loop (ceiling)", 1)]["of_ceiling"] == 1.0
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
