"""``bench/throughput.py --topology windowed|join``: Baton against Kafka Streams, same input, same invocation.

``windowed``: clicks filtered (bots out), re-keyed by page through a repartition topic, counted
in 1-minute tumbling windows with a 10 s grace (bench/topologies/page_windows.py, and
PageWindows.java in the Kafka Streams peer). ``join``: clicks enriched from a table of users, a
stream-table join, then produced (bench/topologies/click_enrichment.py, ClickEnrichment.java).
The input (bench/topologies/workloads.py) is produced once, 12 partitions, before any run.

Each run is one process: Baton's ``baton run`` (one worker process, its defaults), or the
Kafka Streams 4.3.1 app in one JVM with one stream thread (its defaults, but for what the run
needs: application id, bootstrap, guarantee, state dir, reading from the earliest offset).
Both run under each guarantee (``at_least_once``, ``exactly_once_v2``), with each system's own
default commit interval (100 ms under exactly-once, 30 s otherwise, in both) unless
``--alos-commit-ms`` sets the at-least-once one for both. ``--repeat N`` runs all of them N
times in rounds, each round starting with another run; each row is the median run with the
range, and the ratios are of the medians.

**Timed the same way for both.** Every quarter second the bench reads a counter of records
processed: Baton's ``baton_records_consumed_total`` from the worker's ``/metrics``, Kafka
Streams' stream-thread ``process-total`` from the peer's own endpoint (MetricsEndpoint.java:
``KafkaStreams#metrics()`` served on 127.0.0.1), both counting every record their tasks
process, repartition topics included. The span runs from the first poll that sees a record
processed to the poll that sees every record through the whole topology (the input's clicks,
plus the kept clicks read back from the repartition topic, plus the table's rows where Kafka
Streams processes them: ``workloads.Input.targets``). Records/s is of input clicks: the
counter's progress over the span, scaled to clicks, so records processed before the first
poll count in neither the time nor the records. Process start, group join, topic creation and
the JVM's start-up are outside the span; its JIT compiling is inside it, as it is in any run
this long. CPU µs/record is the process's own CPU (``/proc``: the JVM's every thread, GC and
JIT included; Baton's worker process) over the span, per input click; peak RSS is the
process's ``VmHWM`` once the span ends.

**Exact, or it fails.** Once a run is timed it is stopped (SIGTERM: both commit and leave) and
its output read back to the end (read_committed) and checked against the input
(``workloads.check``): windowed, the latest count of every (page, window) equals the kept
clicks in it, no window without clicks; join, every click of a user in the table exactly once
with its user's country and tier, nothing else. Late records dropped are read from both
systems' metrics and reported (the input is built so that none is late). Each run's topics
(output, changelogs, repartition) are deleted once it is checked, so the broker cleans nothing
of one run while the next is timed.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from batondev import kafka, procs
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from baton import __version__ as baton_version
from baton.testing import WorkerProcess, wait_for
from bench.peers import kstreams_build
from bench.topologies import measure, workloads
from bench.topologies.workloads import PARTITIONS, Input

HERE = Path(__file__).resolve().parent
APPS = {"windowed": HERE / "page_windows.py", "join": HERE / "click_enrichment.py"}
SYSTEMS = {"baton": "Baton", "kstreams": "Kafka Streams"}
GUARANTEES = ("at_least_once", "exactly_once_v2")
RUN_TIMEOUT_S = 900.0


@dataclass(frozen=True)
class Settings:
    bootstrap: str
    topology: str
    commit_ms: int | None  # the at-least-once commit interval of both systems; None: their defaults
    workdir: Path
    admin: AdminClient  # one for the invocation


def run_baton(s: Settings, data: Input, guarantee: str, round_: int) -> dict[str, Any]:
    app = f"tp-{s.topology}-baton-{guarantee[:5].replace('_', '')}-{uuid.uuid4().hex[:6]}"
    sink = _sink(s, app)
    extra = ["--commit-interval-ms", str(s.commit_ms)] if s.commit_ms and guarantee == "at_least_once" else []
    worker = WorkerProcess(
        APPS[s.topology],
        bootstrap=s.bootstrap,
        application_id=app,
        state_dir=s.workdir / app,
        log_path=s.workdir / f"{app}.log",
        guarantee=guarantee,
        env={
            "CLICKS_TOPIC": data.clicks,
            "USERS_TOPIC": data.users,
            "COUNTS_TOPIC": sink,
            "ENRICHED_TOPIC": sink,
        },
        extra_args=extra,
    )
    worker.start()
    assert worker.proc is not None
    pid = worker.proc.pid
    span = measure.Span(data.targets(s.topology)["baton"], data.events, procs.running_pid(kafka.NAME))
    try:

        def progress() -> bool:
            if not worker.alive:
                raise RuntimeError(
                    f"the Baton worker exited with {worker.proc and worker.proc.poll()}: {worker.log_path}"
                )
            done = worker.metric("baton_records_consumed_total")
            return span.poll(done, procs.cpu_seconds(pid) if done > 0 else 0.0)

        wait_for(f"baton {guarantee}: did not finish", progress, RUN_TIMEOUT_S, every=measure.POLL_S)
        late = worker.metric("baton_late_records_dropped_total")
        rss = measure.peak_rss_mb([pid])
    finally:
        code = worker.stop(90)
    return _row("baton", guarantee, round_, app, sink, span, late, rss, code)


def run_kstreams(s: Settings, data: Input, guarantee: str, round_: int) -> dict[str, Any]:
    app = f"tp-{s.topology}-kstreams-{guarantee[:5].replace('_', '')}-{uuid.uuid4().hex[:6]}"
    sink = _sink(s, app)
    port = _free_port()
    env = {
        **os.environ,
        "BENCH_BOOTSTRAP": s.bootstrap,
        "BENCH_INPUT": data.clicks,
        "BENCH_TABLE": data.users or "-",
        "BENCH_OUTPUT": sink,
        "BENCH_APP_ID": app,
        "BENCH_GUARANTEE": "exactly_once" if guarantee == "exactly_once_v2" else "at_least_once",
        "BENCH_STATE_DIR": str(s.workdir / app),
        "BENCH_METRICS_PORT": str(port),
    }
    if s.commit_ms and guarantee == "at_least_once":
        env["BENCH_COMMIT_INTERVAL_MS"] = str(s.commit_ms)
    log = s.workdir / f"{app}.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            kstreams_build.command(s.topology),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    span = measure.Span(data.targets(s.topology)["kstreams"], data.events, procs.running_pid(kafka.NAME))
    try:

        def progress() -> bool:
            if proc.poll() is not None:
                raise RuntimeError(f"Kafka Streams exited with {proc.returncode}: {log}")
            done = measure.http_metric(port, "process_total")
            return span.poll(done, procs.cpu_seconds(proc.pid) if done > 0 else 0.0)

        wait_for(f"kstreams {guarantee}: did not finish", progress, RUN_TIMEOUT_S, every=measure.POLL_S)
        late = measure.http_metric(port, "dropped_records_total")
        rss = measure.peak_rss_mb([proc.pid])
    finally:
        code = _stop(proc)
    return _row("kstreams", guarantee, round_, app, sink, span, late, rss, code)


def _row(  # noqa: PLR0917 - one run's parts
    system: str,
    guarantee: str,
    round_: int,
    app: str,
    sink: str,
    span: measure.Span,
    late: float,
    rss: float,
    code: int,
) -> dict[str, Any]:
    return {
        "system": system,
        "guarantee": guarantee,
        "round": round_,
        "events": span.events,
        **span.result(),
        "peak_rss_mb": rss,
        "late_dropped": int(late),
        "exit_code": code,
        "app": app,
        "sink": sink,
    }


def _sink(s: Settings, app: str) -> str:
    sink = f"{app}-out"
    s.admin.create_topics([NewTopic(sink, PARTITIONS, 1)])[sink].result(30)
    return sink


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stop(proc: subprocess.Popen[bytes], timeout: float = 90) -> int:
    """SIGTERM, then SIGKILL after ``timeout``; the exit code (the peer exits 0 once closed)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # anything the JVM left in its session
    return int(proc.returncode)


def _drop_topics(admin: AdminClient, which: list[str]) -> None:
    names = [t for t in admin.list_topics(timeout=10).topics if any(w in t for w in which)]
    if names:
        for future in admin.delete_topics(names).values():
            with contextlib.suppress(Exception):
                future.result(60)


def summarize(results: list[dict[str, Any]], runs: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """One row per (system, guarantee): its median run by records/s (the lower middle one for an
    even count, so a row is one real run), the range, and Baton's ratios to Kafka Streams."""
    rows: list[dict[str, Any]] = []
    for system, guarantee in runs:
        mine = sorted(
            (r for r in results if r["system"] == system and r["guarantee"] == guarantee),
            key=lambda r: float(r["records_per_second"]),
        )
        if not mine:
            continue
        row = {k: v for k, v in mine[(len(mine) - 1) // 2].items() if k != "round"}
        row |= {
            "runs": len(mine),
            "min_records_per_second": mine[0]["records_per_second"],
            "max_records_per_second": mine[-1]["records_per_second"],
            "us_per_record_range": [
                min(r.get("app_us_per_record", 0) for r in mine),
                max(r.get("app_us_per_record", 0) for r in mine),
            ],
            "exact": all(r["exact"] for r in mine),
            "exit_code": max(int(r["exit_code"]) for r in mine),
        }
        rows.append(row)
    by = {(r["system"], r["guarantee"]): r for r in rows}
    for r in rows:
        ks = by.get(("kstreams", r["guarantee"]))
        if ks and ks["records_per_second"]:
            r["of_kstreams"] = round(r["records_per_second"] / ks["records_per_second"], 2)
    return rows


def table(rows: list[dict[str, Any]], repeat: int) -> str:
    """The rows as text. ``app cores``: the run's process; ``cores``: the whole machine's busy
    cores over the span (2.0 on this machine means something else was competing for them);
    ``broker``: the local broker's."""
    head = (
        f"{'system':<15}{'guarantee':<17}{'events':>10}{'seconds':>9}{'records/s':>11}{'of KS':>7}"
        f"{'µs/rec':>8}{'app cores':>10}{'cores':>7}{'broker':>8}{'peak RSS MB':>12}{'late':>6}{'exact':>7}"
        + (f"  {'runs: records/s (range); µs/rec (range)'}" if repeat > 1 else "")
    )
    lines = [head]
    for r in rows:
        us = r.get("us_per_record_range", [0, 0])
        lines.append(
            f"{SYSTEMS[r['system']]:<15}{r['guarantee']:<17}{r['events']:>10,}{r['seconds']:>9}"
            f"{r['records_per_second']:>11,}{r.get('of_kstreams', '-'):>7}{r.get('app_us_per_record', '-'):>8}"
            f"{r.get('app_cores', '-'):>10}{r.get('busy_cores', '-'):>7}{r.get('broker_cores', '-'):>8}"
            f"{r['peak_rss_mb']:>12}"
            f"{r['late_dropped']:>6}{'yes' if r['exact'] else 'NO':>7}"
            + (
                f"  {r['runs']}: {r['min_records_per_second']:,}-{r['max_records_per_second']:,}; "
                f"{us[0]}-{us[1]}"
                if repeat > 1
                else ""
            )
        )
    return "\n".join(lines)


def main(args: Any) -> None:
    """Run the comparison that ``bench/throughput.py`` was asked for (``args``: its parsed options)."""
    topology: str = args.topology
    systems = args.systems.split(",")
    guarantees = args.guarantees.split(",")
    if not set(systems) <= SYSTEMS.keys() or not set(guarantees) <= set(GUARANTEES):
        sys.exit(f"--systems takes {', '.join(SYSTEMS)}; --guarantees {', '.join(GUARANTEES)}")
    if "kstreams" in systems:
        kstreams_build.command(topology)  # built before anything is timed
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    t0 = time.monotonic()
    data = workloads.make_input(
        args.bootstrap, admin, topology, events=args.events, users=args.users, pages=args.pages
    )
    what = (
        f"{data.kept:,} not bots, {len(data.windows):,} page windows"
        if topology == "windowed"
        else f"{data.joined():,} of users in the table of {data.table_rows:,}"
    )
    print(
        f"produced {data.events:,} clicks ({what}) to {data.clicks} in {time.monotonic() - t0:.1f}s",
        flush=True,
    )
    runs = [(system, g) for g in guarantees for system in systems]
    results: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory(prefix="baton-throughput-") as tmp:
            settings = Settings(args.bootstrap, topology, args.alos_commit_ms, Path(tmp), admin)
            for round_ in range(1, args.repeat + 1):
                shift = (round_ - 1) % len(runs)
                for system, guarantee in runs[shift:] + runs[:shift]:
                    run = run_baton if system == "baton" else run_kstreams
                    r = run(settings, data, guarantee, round_)
                    problems, r["output_records"] = workloads.check(args.bootstrap, topology, data, r["sink"])
                    r["exact"], r["problems"] = not problems, problems
                    _drop_topics(admin, [r["app"]])
                    results.append(r)
                    print(
                        f"[{system} {guarantee} round {round_}] {r['records_per_second']:,} records/s, "
                        f"{r.get('app_us_per_record', '-')} µs/record, {'exact' if r['exact'] else problems}",
                        flush=True,
                    )
    finally:
        _drop_topics(admin, [t for t in (data.clicks, data.users) if t])
    rows = summarize(results, runs)
    print(table(rows, args.repeat))
    for g in guarantees:
        baton = next((r for r in rows if r["system"] == "baton" and r["guarantee"] == g), None)
        if baton is not None:
            print(
                f"{g}: Baton {baton.get('of_kstreams', '-')}x Kafka Streams' records/s, "
                f"{baton.get('app_us_per_record', '-')} µs of CPU per record"
            )
    report = {
        "topology": topology,
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "events": data.events,
        "users": args.users,
        "pages": args.pages,
        "partitions": PARTITIONS,
        "kept": data.kept,
        "page_windows": len(data.windows),
        "table_rows": data.table_rows,
        "at_least_once_commit_ms": args.alos_commit_ms,
        "versions": _versions(systems),
        "results": rows,
        "runs": results,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode() + "\n")
    if not all(r["exact"] and r["exit_code"] == 0 for r in results):
        sys.exit("a run's output was not exact, or a process did not stop cleanly (see the table)")


def _versions(systems: list[str]) -> dict[str, str]:
    out = {
        "baton-streams": baton_version,
        "confluent-kafka": importlib.metadata.version("confluent-kafka"),
        "python": platform.python_version(),
    }
    if "kstreams" in systems:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
        out |= {"kafka-streams": kstreams_build.VERSION, "java": java.splitlines()[0] if java else "unknown"}
    return out
