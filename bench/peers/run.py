"""The click counter on Baton, Quix Streams, Faust and Kafka Streams: one input, one broker, one table.

    python bench/peers/run.py [--bootstrap 127.0.0.1:29092] [--events 2000000] [--users 100000]
                              [--systems baton,quix,faust,kstreams]
                              [--guarantees at_least_once,exactly_once] [--json bench/peers/results.json]
                              [--repeat 1] [--resume]

The JSON is written after every run; ``--resume`` keeps the runs already in it (same input,
commit intervals and versions) and runs only the missing ones, so a two-hour run that was
interrupted does not start over. The input is the same on every invocation (a fixed seed).

``--repeat N`` runs every system N times, in rounds: each round runs each system once, and
each round starts with a different system, so that no system always runs first after the
input is produced or last after the others. The table gives each system's median run and
the range of its records/s. Why: on a shared 2-core machine the speed of the same CPU-bound
loop drifts by a quarter from one minute to the next (docs/benchmarks.md, "Side by side", on
``--repeat``), so one run of each
system compares two moments of the machine as much as the two systems. Every run's own
topics (output, changelogs) are deleted once it is measured, so the broker compacts or
deletes nothing of one run while the next is timed.

Every system runs the same topology (bench/peers/CONTRACT.md) as one process with one
processing thread, on the same pre-produced input (``--events`` clicks over 8 partitions and
``--users`` users), under each guarantee it supports, with the same commit interval
(``--eos-commit-ms``, Kafka Streams' exactly-once default, and ``--alos-commit-ms``).

Per run:

* **records/s**: the app's consumer group commits are polled every 0.2 s; the rate is the
  records committed between the first poll that saw progress and the poll that saw all of
  them, over that time (start-up and group join excluded; commit-interval granularity).
* **peak RSS** and **CPU seconds**: the process's own rusage (``wait4``), whole run.
* **correct**: the output topic is read to its end (read_committed) and the last count of
  every user must equal the true count; a system with a wrong count is reported as wrong and
  its numbers are not put in the table.
* **restore**: the state directory is deleted, one more click is produced for 8 users, the
  app is started again with the same application id; the time from process start until all
  8 new counts (old + 1) are on the output topic. This includes process start and group
  join, which are also measured alone (``startup``: start until the first commit of the
  fresh run above, an upper bound).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "dev"))

from baton import __version__ as baton_version  # noqa: E402
from baton.testing import produce  # noqa: E402

PARTITIONS = 8
GUARANTEES = ("at_least_once", "exactly_once")
MARKERS = 8


@dataclass(frozen=True)
class System:
    name: str
    label: str
    versions: Callable[[], dict[str, str]]
    command: Callable[[str, dict[str, str]], list[str]]
    cwd: Path = HERE


def _baton_command(guarantee: str, env: dict[str, str]) -> list[str]:
    return [
        sys.executable,
        "-m",
        "baton.cli",
        "run",
        str(HERE / "baton_app.py"),
        "--bootstrap-servers",
        env["BENCH_BOOTSTRAP"],
        "--application-id",
        env["BENCH_APP_ID"],
        "--state-dir",
        env["BENCH_STATE_DIR"],
        "--metrics-port",
        "0",
        "--processing-guarantee",
        "exactly_once_v2" if guarantee == "exactly_once" else "at_least_once",
        "--commit-interval-ms",
        env["BENCH_COMMIT_INTERVAL_MS"],
    ]


def _peer(module: str) -> Any:
    """bench/peers/venvs.py or kstreams_build.py, imported only when that peer is asked for."""
    return importlib.import_module(module)


def _python_peer(
    peer: str, script: str, extra: tuple[str, ...] = ()
) -> Callable[[str, dict[str, str]], list[str]]:
    def command(_guarantee: str, _env: dict[str, str]) -> list[str]:
        return [str(_peer("venvs").python_for(peer)), str(HERE / script), *extra]

    return command


def _peer_versions(peer: str) -> dict[str, str]:
    return {str(k): str(v) for k, v in _peer("venvs").versions(peer).items()}


def _kstreams_command(_guarantee: str, _env: dict[str, str]) -> list[str]:
    return [str(a) for a in _peer("kstreams_build").command()]


def _kstreams_versions() -> dict[str, str]:
    return {"kafka-streams": str(_peer("kstreams_build").VERSION), "java": _java_version()}


def _confluent_version() -> str:
    return importlib.metadata.version("confluent-kafka")


SYSTEMS = {
    "baton": System(
        "baton",
        "Baton",
        lambda: {
            "baton-streams": baton_version,
            "confluent-kafka": _confluent_version(),
            "python": platform.python_version(),
        },
        _baton_command,
    ),
    "quix": System(
        "quix", "Quix Streams", lambda: _peer_versions("quix"), _python_peer("quix", "quix_app.py")
    ),
    "faust": System(
        "faust",
        "Faust",
        lambda: _peer_versions("faust"),
        _python_peer("faust", "faust_app.py", ("worker", "-l", "warn", "--without-web")),
    ),
    "kstreams": System("kstreams", "Kafka Streams", _kstreams_versions, _kstreams_command),
}


def _java_version() -> str:
    out = subprocess.run(["java", "-version"], capture_output=True, text=True, check=False).stderr
    return out.splitlines()[0] if out else "unknown"


# --- the input and the truth -------------------------------------------------------------------


def make_input(bootstrap: str, admin: AdminClient, topic: str, events: int, users: int) -> Counter[str]:
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    rng = random.Random(20261122)
    names = [f"user-{i:06d}" for i in range(users)]
    truth: Counter[str] = Counter()

    def records() -> Iterator[tuple[bytes, bytes]]:
        for i in range(events):
            user = names[rng.randrange(users)]
            truth[user] += 1
            yield user.encode(), orjson.dumps({"user_id": user, "timestamp": 1678886400 + i})

    produce(bootstrap, topic, records())
    return truth


def committed(admin: AdminClient, group: str, topic: str) -> int:
    from baton.group_offsets import committed_offsets

    try:
        offsets = committed_offsets(admin, group, [TopicPartition(topic, p) for p in range(PARTITIONS)])
    except Exception:
        return 0
    return sum(max(tp.offset, 0) for tp in offsets or [])


def end_offsets(consumer: Consumer, topic: str) -> dict[int, int]:
    return {
        p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in range(PARTITIONS)
    }


def read_counts(
    bootstrap: str, topic: str, start: dict[int, int] | None = None
) -> tuple[dict[str, int], int]:
    """The last count per user on ``topic`` (from ``start``), and how many records were read."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-reader-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.max.bytes": 64 << 20,
        }
    )
    try:
        ends = end_offsets(consumer, topic)
        begin = start or {}
        todo = {p for p in range(PARTITIONS) if ends[p] > begin.get(p, 0)}
        consumer.assign([TopicPartition(topic, p, begin.get(p, -2)) for p in todo])
        latest: dict[str, int] = {}
        records = 0
        deadline = time.monotonic() + 600
        while todo and time.monotonic() < deadline:
            for msg in consumer.consume(10000, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        todo.discard(msg.partition() or 0)
                        continue
                    raise RuntimeError(str(err))
                records += 1
                latest[(msg.key() or b"").decode()] = int(msg.value() or b"0")
                if (msg.offset() or 0) + 1 >= ends[msg.partition() or 0]:
                    todo.discard(msg.partition() or 0)
        return latest, records
    finally:
        consumer.close()


def check(truth: Counter[str], got: dict[str, int]) -> list[str]:
    """What is wrong with ``got``, at most a few examples (empty when it is right)."""
    problems = [f"{u}: {got.get(u)} != {n}" for u, n in truth.items() if got.get(u) != n]
    extra = [f"{u}: unexpected key" for u in got.keys() - truth.keys()]
    wrong = problems + extra
    return [f"{len(wrong)} wrong keys", *wrong[:5]] if wrong else []


# --- running one system ------------------------------------------------------------------------


@dataclass
class Process:
    """One app process; its rusage once it has exited."""

    argv: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    rusage: Any = None
    code: int | None = None

    def start(self) -> Process:
        with self.log.open("ab") as out:
            self.started = time.monotonic()
            self.proc = subprocess.Popen(
                self.argv,
                env=self.env,
                cwd=self.cwd,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        return self

    def alive(self) -> bool:
        assert self.proc is not None
        if self.code is not None:
            return False
        pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return True
        self._reaped(status, usage)
        return False

    def stop(self, timeout: float = 120) -> int:
        """SIGTERM, wait (SIGKILL after ``timeout``), keep the rusage; the exit code."""
        assert self.proc is not None
        if self.code is None:
            self.proc.send_signal(signal.SIGTERM)
            killer = threading.Timer(timeout, self.proc.kill)
            killer.start()
            _pid, status, usage = os.wait4(self.proc.pid, 0)
            killer.cancel()
            self._reaped(status, usage)
        assert self.code is not None
        return self.code

    def _reaped(self, status: int, usage: Any) -> None:
        self.code = os.waitstatus_to_exitcode(status)
        self.rusage = usage
        assert self.proc is not None
        self.proc.returncode = self.code
        # The rest of the process group (a JVM's or a worker's helpers) goes too.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)


@dataclass
class RunResult:
    system: str
    guarantee: str
    ok: bool = False  # the run's final counts are right
    problems: list[str] = field(default_factory=list)
    restore_problem: str = ""  # what was wrong after the state wipe, if anything
    unfinished: str = ""  # set when --timeout ended the run: a rate, but no verdict on counts
    numbers: dict[str, Any] = field(default_factory=dict)
    round: int = 1  # which of --repeat's rounds
    app: str = ""  # its application id, which every topic of the run's contains

    @property
    def timed(self) -> bool:
        """A run with a rate to report: a correct one, or one --timeout cut short (no verdict)."""
        return self.ok or bool(self.unfinished and not self.problems)


def run_one(  # noqa: PLR0917 (one benchmark run has this many inputs)
    system: System,
    guarantee: str,
    bootstrap: str,
    admin: AdminClient,
    source: str,
    truth: Counter[str],
    commit_ms: int,
    work: Path,
    timeout: float,
) -> RunResult:
    app = f"bench-{system.name}-{guarantee.replace('_', '-')}-{uuid.uuid4().hex[:6]}"
    sink = f"{app}-out"
    admin.create_topics([NewTopic(sink, PARTITIONS, 1)])[sink].result(30)
    state = work / app / "state"
    state.mkdir(parents=True)
    env = {
        **os.environ,
        "BENCH_BOOTSTRAP": bootstrap,
        "BENCH_INPUT": source,
        "BENCH_OUTPUT": sink,
        "BENCH_APP_ID": app,
        "BENCH_GUARANTEE": guarantee,
        "BENCH_STATE_DIR": str(state),
        "BENCH_COMMIT_INTERVAL_MS": str(commit_ms),
        "PYTHONUNBUFFERED": "1",
    }
    result = RunResult(system.name, guarantee, app=app)
    events = sum(truth.values())
    argv = system.command(guarantee, env)
    log = work / f"{app}.log"
    print(f"[{system.name} {guarantee}] {' '.join(argv[:3])} ... (log {log})", flush=True)

    proc = Process(argv, env, log, system.cwd).start()
    first: tuple[float, int] | None = None
    last = (0.0, 0)
    deadline = time.monotonic() + timeout
    try:
        while True:
            done = committed(admin, app, source)
            now = time.monotonic()
            if done and first is None:
                first = (now, done)
            last = (now, done)
            if done >= events:
                break
            if not proc.alive():
                result.problems.append(f"exited with {proc.code} after {done:,} records (see {log})")
                return result
            if now > deadline and first is not None:
                # Unfinished: its rate so far is still worth reporting, its counts cannot be checked.
                result.unfinished = f"not finished in {timeout:.0f} s ({done:,} of {events:,} records)"
                break
            if now > deadline:
                result.problems.append(f"no progress in {timeout:.0f} s")
                return result
            time.sleep(0.2)
    finally:
        code = proc.stop()
    assert first is not None
    if code != 0:
        result.problems.append(f"exit code {code} on SIGTERM")
    usage = proc.rusage
    span = last[0] - first[0]
    counted = last[1] - first[1]
    got, out_records = read_counts(bootstrap, sink)
    if not result.unfinished:
        result.problems += check(truth, got)
    result.numbers = {
        "records_per_second": round(counted / span) if span > 0 else None,
        "measured_records": counted,
        "measured_seconds": round(span, 2),
        "end_to_end_seconds": round(last[0] - proc.started, 2),
        "startup_seconds": round(first[0] - proc.started, 2),
        "peak_rss_mb": round(usage.ru_maxrss / 1024),
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "minor_faults": usage.ru_minflt,  # page faults: heap growth and trimming show here
        "output_records": out_records,
        "changelog_records": changelog_records(bootstrap, admin, app),
    }
    if result.problems or result.unfinished:
        return result
    result.ok = True
    try:
        result.numbers.update(
            restore(system, guarantee, bootstrap, source, sink, truth, env, state, work, timeout)
        )
    except RestoreFailed as exc:
        result.restore_problem = str(exc)
    return result


def changelog_records(bootstrap: str, admin: AdminClient, app: str) -> int:
    """Records in the app's changelog topics (what a full restore has to read, before compaction)."""
    topics = [
        t for t in admin.list_topics(timeout=10).topics if app in t and "changelog" in t
    ]  # Quix: changelog__<app>--
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex}"})
    try:
        total = 0
        for topic in topics:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            for p in meta.partitions:
                low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                total += high - low
        return total
    finally:
        consumer.close()


def restore(  # noqa: PLR0917
    system: System,
    guarantee: str,
    bootstrap: str,
    source: str,
    sink: str,
    truth: Counter[str],
    env: dict[str, str],
    state: Path,
    work: Path,
    timeout: float,
) -> dict[str, Any]:
    shutil.rmtree(state)
    state.mkdir()
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bench-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
        }
    )
    try:
        start = end_offsets(consumer, sink)
    finally:
        consumer.close()
    users = sorted(truth)[:: max(1, len(truth) // MARKERS)][:MARKERS]
    want = {u: truth[u] + 1 for u in users}
    produce(
        bootstrap,
        source,
        ((u.encode(), orjson.dumps({"user_id": u, "timestamp": 1778886400})) for u in users),
    )
    log = work / f"{env['BENCH_APP_ID']}-restore.log"
    proc = Process(system.command(guarantee, env), env, log, system.cwd).start()
    deadline = time.monotonic() + timeout
    seconds: float | None = None
    problem = ""
    try:
        while time.monotonic() < deadline:
            got, _n = read_counts(bootstrap, sink, start)
            if all(got.get(u) == n for u, n in want.items()):
                seconds = time.monotonic() - proc.started
                break
            wrong = {u: got[u] for u in users if u in got and got[u] != want[u]}
            if wrong:
                problem = f"after restore: {wrong} (want {want})"
                break
            if not proc.alive():
                problem = f"restore run exited with {proc.code} (see {log})"
                break
            time.sleep(0.2)
        else:
            problem = f"restore: the new counts did not appear within {timeout:.0f} s"
    finally:
        proc.stop()
    truth.update(users)  # the markers are input now, whatever the app made of them
    if problem:
        raise RestoreFailed(problem)
    return {"restore_seconds": round(seconds or 0, 2)}


class RestoreFailed(Exception):
    pass


# --- the table ---------------------------------------------------------------------------------


def median_run(runs: list[RunResult]) -> RunResult:
    """The run a (system, guarantee) row shows: the median of its timed runs by records/s.

    With an even number the lower middle run: a row is always one real run, never an average
    of two, so its memory, CPU and restore numbers belong to the rate beside them. A row
    whose every run failed shows the first failure.
    """
    timed = sorted((r for r in runs if r.timed), key=lambda r: r.numbers.get("records_per_second") or 0)
    return timed[(len(timed) - 1) // 2] if timed else runs[0]


def table(results: list[RunResult], labels: dict[str, str]) -> str:
    head = (
        "system",
        "guarantee",
        "records/s",
        "vs Baton",
        "runs (range)",
        "peak RSS MB",
        "CPU s",
        "restore s",
        "changelog records",
        "counts",
    )
    groups: dict[tuple[str, str], list[RunResult]] = {}
    for r in results:
        groups.setdefault((r.system, r.guarantee), []).append(r)
    shown = {key: median_run(runs) for key, runs in groups.items()}
    baton = {
        guarantee: r.numbers.get("records_per_second")
        for (system, guarantee), r in shown.items()
        if system == "baton" and r.ok
    }
    rows = []
    for key, runs in groups.items():
        r, guarantee = shown[key], key[1]
        n = r.numbers
        rate = n.get("records_per_second")
        timed = r.timed  # an unfinished run has a rate, not a verdict
        ratio = f"{rate / baton[guarantee]:.2f}x" if timed and rate and baton.get(guarantee) else "-"
        rates = [
            x.numbers["records_per_second"] for x in runs if x.timed and x.numbers.get("records_per_second")
        ]
        spread = f"{len(runs)}" + (f" ({min(rates):,}-{max(rates):,})" if len(rates) > 1 else "")
        restore = n.get("restore_seconds", "WRONG counts" if r.restore_problem else "-")
        wrong = [x for x in runs if not x.timed]
        verdict = "correct" if r.ok else r.unfinished if timed else "WRONG: " + "; ".join(r.problems)[:120]
        if wrong and r.timed:  # the median run was fine, another was not: say so
            verdict += f"; {len(wrong)} of {len(runs)} runs WRONG: " + "; ".join(wrong[0].problems)[:120]
        rows.append(
            (
                labels[r.system],
                guarantee,
                f"{rate:,}" if timed and rate else "-",
                ratio,
                spread,
                f"{n['peak_rss_mb']:,}" if timed else "-",
                f"{n['cpu_seconds']}" if timed else "-",
                f"{restore}",
                f"{n['changelog_records']:,}" if timed else "-",
                verdict,
            )
        )
    out = [
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" if i < 2 or i == len(head) - 1 else "---:" for i in range(len(head))) + "|",
    ]
    out += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default=os.environ.get("BATON_KAFKA_BOOTSTRAP", "127.0.0.1:29092"))
    parser.add_argument("--events", type=int, default=2_000_000)
    parser.add_argument("--users", type=int, default=100_000)
    parser.add_argument("--systems", default="baton,quix,faust,kstreams")
    parser.add_argument("--guarantees", default=",".join(GUARANTEES))
    parser.add_argument("--eos-commit-ms", type=int, default=100)
    parser.add_argument("--alos-commit-ms", type=int, default=1000)
    parser.add_argument(
        "--timeout",
        type=float,
        default=1800,
        help="seconds one run may take; a slower system gets its rate so far and no verdict",
    )
    parser.add_argument("--json", type=Path, default=HERE / "results.json")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="run every system this many times, in rounds that each start with another system; "
        "the table gives each system's median run",
    )
    parser.add_argument("--keep-logs", type=Path, help="copy the apps' logs here")
    parser.add_argument(
        "--resume",
        action="store_true",
        help="keep the runs already in --json (same input, commit intervals and versions) "
        "and run only the missing ones; the JSON is written after every run",
    )
    args = parser.parse_args()
    systems = [SYSTEMS[s] for s in args.systems.split(",")]
    guarantees = args.guarantees.split(",")
    for s in systems:  # install and build before anything is timed
        s.command(
            guarantees[0],
            {
                "BENCH_BOOTSTRAP": args.bootstrap,
                "BENCH_APP_ID": "x",
                "BENCH_STATE_DIR": "x",
                "BENCH_COMMIT_INTERVAL_MS": "0",
            },
        )
    versions = {s.name: s.versions() for s in systems}
    settings = {
        "events": args.events,
        "users": args.users,
        "partitions": PARTITIONS,
        "commit_interval_ms": {"exactly_once": args.eos_commit_ms, "at_least_once": args.alos_commit_ms},
    }
    results = resumed(args.json, settings, versions) if args.resume else []
    done = {(r.system, r.guarantee, r.round) for r in results}
    if done:
        print(f"resuming: {len(done)} runs kept from {args.json}", flush=True)

    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    source = f"bench-peers-clicks-{uuid.uuid4().hex[:6]}"
    t0 = time.monotonic()
    truth = make_input(args.bootstrap, admin, source, args.events, args.users)
    print(
        f"produced {args.events:,} clicks for {len(truth):,} users to {source} in {time.monotonic() - t0:.1f} s",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="baton-bench-peers-"))
    labels = {s.name: s.label for s in systems}
    try:
        for guarantee, round_, s in schedule(guarantees, systems, args.repeat):
            if (s.name, guarantee, round_) in done:
                continue
            commit_ms = args.eos_commit_ms if guarantee == "exactly_once" else args.alos_commit_ms
            r = run_one(s, guarantee, args.bootstrap, admin, source, truth, commit_ms, work, args.timeout)
            r.round = round_
            drop_topics(admin, naming(r.app))  # nothing of this run left while the next is timed
            results.append(r)
            which = f"{s.name} {guarantee}" + (f" round {round_}" if args.repeat > 1 else "")
            print(
                f"[{which}] {'ok' if r.ok else 'WRONG'} {r.numbers} {r.problems} "
                f"{r.restore_problem} {r.unfinished}",
                flush=True,
            )
            write_report(args.json, settings, versions, results, labels)  # an interrupted run can --resume
    finally:
        if args.keep_logs:
            args.keep_logs.mkdir(parents=True, exist_ok=True)
            for log in work.glob("*.log"):
                shutil.copy(log, args.keep_logs / log.name)
        shutil.rmtree(work, ignore_errors=True)
        drop_topics(admin, lambda t: t == source or any(f"bench-{s.name}-" in t for s in systems))
    results.sort(
        key=lambda r: (GUARANTEES.index(r.guarantee), [s.name for s in systems].index(r.system), r.round)
    )
    print(write_report(args.json, settings, versions, results, labels))
    print(f"wrote {args.json}")


def drop_topics(admin: AdminClient, which: Callable[[str], bool]) -> None:
    """Delete the matching topics; one already gone (another run deleted it after the listing) is fine."""
    names = [t for t in admin.list_topics(timeout=10).topics if which(t)]
    if names:
        for future in admin.delete_topics(names).values():
            try:
                future.result(60)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise


def naming(app: str) -> Callable[[str], bool]:
    """Every topic of one run: its name contains the run's application id (Kafka Streams' too)."""
    return lambda topic: app in topic


def schedule(guarantees: list[str], systems: list[System], repeat: int) -> Iterator[tuple[str, int, System]]:
    """Each guarantee's rounds; round r starts with the r-th system (see the module doc)."""
    for guarantee in guarantees:
        for round_ in range(1, repeat + 1):
            shift = (round_ - 1) % len(systems)
            for s in systems[shift:] + systems[:shift]:
                yield guarantee, round_, s


def resumed(path: Path, settings: dict[str, Any], versions: dict[str, Any]) -> list[RunResult]:
    """The runs an earlier, interrupted invocation wrote, if they measured the same thing."""
    if not path.exists():
        return []
    report = json.loads(path.read_text())
    if {k: report.get(k) for k in settings} != settings:
        sys.exit(
            f"--resume: {path} was measured with other settings ({ {k: report.get(k) for k in settings} })"
        )
    for name, current in versions.items():
        if report["versions"].get(name, current) != current:
            sys.exit(
                f"--resume: {name} is now {current}, {path} has {report['versions'][name]}; run without --resume"
            )
    keys = ("system", "guarantee", "correct", "problems", "restore_problem", "unfinished", "round")
    return [
        RunResult(
            system=r["system"],
            guarantee=r["guarantee"],
            ok=r["correct"],
            problems=r["problems"],
            restore_problem=r["restore_problem"],
            unfinished=r["unfinished"],
            numbers={k: v for k, v in r.items() if k not in keys},
            round=r.get("round", 1),
        )
        for r in report["results"]
        if r["system"] in versions
    ]


def write_report(
    path: Path,
    settings: dict[str, Any],
    versions: dict[str, Any],
    results: list[RunResult],
    labels: dict[str, str],
) -> str:
    text = table(results, labels)
    report = {
        **settings,
        "machine": {
            "cpus": os.cpu_count(),
            "platform": platform.platform(),
            "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
        },
        "versions": versions,
        "results": [
            {
                "system": r.system,
                "guarantee": r.guarantee,
                "correct": r.ok,
                "problems": r.problems,
                "restore_problem": r.restore_problem,
                "unfinished": r.unfinished,
                "round": r.round,
                **r.numbers,
            }
            for r in results
        ],
        "table": text,
    }
    path.write_text(json.dumps(report, indent=2) + "\n")
    return text


if __name__ == "__main__":
    main()
