"""The short variant of ``bench/peers/run.py``: all four systems on a small input.

It installs what the benchmark needs (the Quix Streams and Faust venvs, the Kafka Streams
build), runs each system once under exactly-once on 3,000 clicks, and checks what the long
run relies on: every system's final counts are verified right, the numbers are there, and
the restore after a state wipe gives a verdict. Faust's restore is not asserted correct: it
is what the benchmark measures, and docs/benchmarks.md reports what it found.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

RUN = Path(__file__).resolve().parents[2] / "bench" / "peers" / "run.py"


def test_all_four_peers_count_right_on_a_small_input(kafka_bootstrap: str, tmp_path: Path) -> None:
    out = tmp_path / "peers.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(RUN),
            "--bootstrap",
            kafka_bootstrap,
            "--events",
            "3000",
            "--users",
            "300",
            "--guarantees",
            "exactly_once",
            "--timeout",
            "300",
            "--json",
            str(out),
            "--keep-logs",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=1500,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report = json.loads(out.read_text())
    results = {r["system"]: r for r in report["results"]}
    assert set(results) == {"baton", "quix", "faust", "kstreams"}
    for name, r in results.items():
        assert r["correct"], (name, r["problems"])
        assert r["peak_rss_mb"] > 0 and r["cpu_seconds"] > 0 and r["output_records"] > 0, (name, r)
        assert r["changelog_records"] >= 300, (name, r)  # every user's count is in the changelog
        assert ("restore_seconds" in r) != bool(r["restore_problem"]), (name, r)
    for name in ("baton", "quix", "kstreams"):
        assert results[name]["restore_problem"] == "", (name, results[name]["restore_problem"])
    assert report["versions"]["quix"]["quixstreams"] == "3.28.1"
    assert report["versions"]["kstreams"]["kafka-streams"] == "4.3.1"
    assert "| Baton | exactly_once |" in proc.stdout

    # An interrupted long run resumes: the runs in the JSON stay, only the missing one runs.
    report["results"] = [r for r in report["results"] if r["system"] != "baton"]
    out.write_text(json.dumps(report))
    again = subprocess.run(
        [
            sys.executable,
            str(RUN),
            "--bootstrap",
            kafka_bootstrap,
            "--events",
            "3000",
            "--users",
            "300",
            "--guarantees",
            "exactly_once",
            "--timeout",
            "300",
            "--json",
            str(out),
            "--resume",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert "resuming: 3 runs kept" in again.stdout
    assert "[baton exactly_once] ok" in again.stdout
    assert not any(f"[{name} exactly_once]" in again.stdout for name in ("quix", "faust", "kstreams"))
    resumed = {r["system"]: r for r in json.loads(out.read_text())["results"]}
    assert set(resumed) == set(results) and resumed["baton"]["correct"]
    assert all(resumed[name] == results[name] for name in ("quix", "faust", "kstreams"))
