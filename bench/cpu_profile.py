"""Where a worker's time goes on the per-record path: py-spy samples of the click counter, by stage;
and, with ``in-process``, CPU and Python calls per record of several topologies without a broker.

    python bench/cpu_profile.py --bootstrap 127.0.0.1:9092 [--events 1000000]
                                [--guarantee at_least_once] [--json bench/cpu_profile.json]
    python bench/cpu_profile.py in-process [--topology windowed-repartition,stream-table-join]
                                [--records 300000] [--paths fast,general] [--repeat 5] [--json F]
                                [--instructions] [--instruction-records 40000]

**In-process** (no broker; the worker's own code and nothing else). Records run through the
worker's real ``Task`` and processor tree over real RocksDB stores, with the worker's memory
settings, in runs of 500 records as ``consume()`` hands them over, and a commit (cache
flush, RocksDB batch) every 12,500 input records. The topologies (``SCENARIOS``): the click
counter (examples/click_counter.py), issue 50's windowed/repartition topology and a
stream-table join (the shapes of bench/topologies/page_windows.py and click_enrichment.py),
sessions (examples/page_views.py's shape), and hopping and sliding windows. A topology of two
sub-topologies runs both tasks: what the first sends to its repartition topic becomes the
second's input, run by run, as a worker interleaves them (turning sent records into
consumed ones is not timed). ``send`` counts records and copies a repartition record's
value, as librdkafka does. Reported per input record: CPU (``time.process_time``, the best
of ``--repeat`` runs; paths alternate, so a change of the machine's speed meets each alike),
and Python calls counted by ``cProfile`` in a separate run (``py`` functions, ``C``
built-ins called from Python; the bench's own frames, its send among them, are left out:
the worker's ``Output.send`` is one more per record sent): counts are what machine load
cannot move. With ``--instructions``, also the instructions per input record that valgrind
counts (``cachegrind``, every thread of the process: RocksDB's included), from two runs of
``--instruction-records`` / 4 and ``--instruction-records`` records over the same generated
input, their difference divided by the records between: repeatable to a few instructions
whatever else the machine does, so two checkouts compare on a noisy machine where CPU time
cannot tell a 5 % change (valgrind runs Python some 50 times slower: keep the records few).
``fast`` is the worker as it runs; ``general`` is
``Task(fuse_aggregations=False)``, the reference path every fast path is tested against
(tests/unit/worker/runtime/test_fused_model.py, test_fast_path_models.py).

Without ``in-process``, the worker runs exactly as in ``bench/throughput.py`` (the same
input, one process); py-spy (installed on first use under ``~/.cache/baton/py-spy-<version>``)
samples it from its first processed record to its last. Each sample is charged to the
innermost frame that names a stage (the rules below, first match from the leaf up; a sample
in the click counter's fused loop, ``runtime/fused.py``, by the text of its line), so the
table adds up to 100 % of the processing thread's samples; the other threads (restore,
membership, HTTP) are reported apart. The top leaf functions are printed too: the stages say
where to look, the leaves what to change.
"""

from __future__ import annotations

import argparse
import collections
import cProfile
import functools
import os
import pstats
import random
import re
import runpy
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Message
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from baton import JSON, STR, Topology, hopping, sessions, sliding, tumbling, until_window_closes
from baton.testing import WorkerProcess, wait_for
from baton.worker.naming import TaskId
from baton.worker.runtime.memory import keep_heap_top, settle_garbage_collector
from baton.worker.runtime.task import Task
from baton.worker.state.stores import KeyValueStore, RocksDBStore
from baton.worker.state.task_store import CacheBudget
from baton.worker.topology.context import OpenGate

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))

from batondev.paths import CACHE, CLICK_COUNTER
from batondev.standbys import load_user_clicks

PY_SPY = "0.4.1"
# (stage, pattern on "function (file)"), tried on each frame from the leaf up: first match wins.
STAGES = [
    ("deserialize (pydantic, orjson, key decode)", r"deserialize|model_validate|pydantic"),
    ("serialize (count and key to bytes)", r"\bserialize\b|dumps"),
    ("produce (changelog + sink send)", r"^send .*producer\.py|produce"),
    ("metrics (prometheus)", r"prometheus_client|^inc |^labels "),
    ("commit (flush, transaction, offsets)", r"^_commit |^commit |committed_ok|^flush .*task\.py"),
    ("write cache (get, put, dirty entries)", r"task_store\.py"),
    ("aggregate (count's initializer, aggregator)", r"^_update |dsl\.py"),
    (
        "dispatch (task.process_run, forward, sinks, gate)",
        r"^process |^process_run |^_dispatch |^run_end |^forward |^allows ",
    ),
    ("consume + loop (confluent consume, batch bookkeeping)", r"^_loop |^consume "),
]


# The fused loop (baton/worker/runtime/fused.py) does the stages above in one frame, calling C
# functions py-spy does not show: its samples are charged by the text of the line they are on.
FUSED_FRAME = re.compile(r"\((?P<path>\S*fused\.py):(?P<line>\d+)\)")
FUSED_LINES = [
    ("deserialize (pydantic, orjson, key decode)", r"deserialize_|extract\("),
    ("aggregate (count's initializer, aggregator)", r"aggregator\(|initializer\("),
    ("write cache (get, put, dirty entries)", r"overlay|dirty|entry_size|budget|store\.get"),
    ("dispatch (task.process_run, forward, sinks, gate)", r""),
]


@functools.cache
def _source_line(path: str, line: int) -> str:
    """Line ``line`` of the worker's file, or of this checkout's copy of it."""
    for candidate in (Path(path), Path(__file__).resolve().parents[1] / "baton/worker/runtime/fused.py"):
        if candidate.is_file():
            lines = candidate.read_text().splitlines()
            return lines[line - 1] if 0 < line <= len(lines) else ""
    return ""


def _py_spy() -> Path:
    target = CACHE / f"py-spy-{PY_SPY}"
    binary = target / "bin" / "py-spy"
    if not binary.exists():
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "-q", "--target", str(target), f"py-spy=={PY_SPY}"],
            check=True,
        )
    return binary


def _stage(stack: list[str]) -> str:
    for frame in reversed(stack):
        fused = FUSED_FRAME.search(frame)
        if fused:
            text = _source_line(fused["path"], int(fused["line"]))
            return next(name for name, pattern in FUSED_LINES if re.search(pattern, text))
        for name, pattern in STAGES:
            if re.search(pattern, frame):
                return name
    return "other"


def analyse(raw: Path) -> dict[str, object]:
    """Collapsed stacks (``thread;frame;...;leaf count``) -> shares by stage and top leaves."""
    stages: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    threads: collections.Counter[str] = collections.Counter()
    main = unparsed = 0
    # "\n" only: str.splitlines() also breaks at \r, \x1c-\x1e and \u2028, which can occur in
    # frame names py-spy prints, and a fragment's last word is then no count
    for line in raw.read_text(errors="replace").split("\n"):
        stack_text, _, count_text = line.rpartition(" ")
        if not stack_text:
            continue
        if not count_text.isdigit():
            unparsed += 1
            continue
        frames = stack_text.split(";")
        count = int(count_text)
        if not any(f.startswith("_loop ") for f in frames):
            threads[frames[0]] += count
            continue
        main += count
        stages[_stage(frames)] += count
        leaves[frames[-1]] += count
    return {
        "samples": main,
        "stages": {k: round(100 * v / main, 1) for k, v in stages.most_common()},
        "top_leaves": {k: round(100 * v / main, 1) for k, v in leaves.most_common(20)},
        "other_threads_samples": dict(threads.most_common(5)),
        "unparsed_lines": unparsed,
    }


# -- in-process: the worker's Task over real RocksDB stores, no broker -----------------------

RUN = 500  # records per process_run call: a consume() batch's run of one partition
COMMIT_EVERY = 12_500  # input records per commit (about 100 ms of one saturated process)
USERS = 10_000
PAGES = 1_000
BASE_MS = 1_678_886_400_000


def _click_counter() -> Topology:
    """examples/click_counter.py: clicks (pydantic model) counted per user, counts to a topic."""
    env = {"CLICKS_TOPIC": "clicks", "COUNTS_TOPIC": "counts"}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        topology: Topology = runpy.run_path(str(CLICK_COUNTER))["topology"]
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return topology


def _windowed_repartition() -> Topology:
    """Issue 50's topology (bench/topologies/page_windows.py's shape): bots' clicks dropped, the
    rest re-keyed by page (a repartition topic) and counted in 1-minute tumbling windows with a
    10 s grace, the counts to a topic."""
    topology = Topology()
    (
        topology.stream("clicks", key=STR, value=JSON)
        .filter(lambda _user, click: not click["bot"])
        .group_by(lambda _user, click: click["page"], key=STR, name="clicks-by-page")
        .windowed_by(tumbling(60_000, grace=10_000))
        .count(store="page-counts")
        .to_stream()
        .to("page-counts", value=JSON)
    )
    return topology


def _hopping() -> Topology:
    """Clicks per page in 1-minute windows every 10 s (six windows a click), 10 s of grace."""
    topology = Topology()
    (
        topology.stream("clicks", key=STR, value=JSON)
        .group_by(lambda _user, click: click["page"], key=STR, name="clicks-by-page")
        .windowed_by(hopping(60_000, advance=10_000, grace=10_000))
        .count(store="page-counts")
        .to_stream()
        .to("page-counts", value=JSON)
    )
    return topology


def _sliding() -> Topology:
    """Clicks per user in sliding windows of 30 s (each window a set of clicks at most 30 s
    apart), 10 s of grace: a click opens windows and falls in its neighbours'."""
    topology = Topology()
    (
        topology.stream("clicks", key=STR, value=JSON)
        .group_by_key()
        .windowed_by(sliding(30_000, grace=10_000))
        .count(store="user-windows")
        .to_stream()
        .to("user-windows", value=JSON)
    )
    return topology


def _sessions() -> Topology:
    """examples/page_views.py's shape: each user's clicks in sessions (30 s of inactivity close
    one, 10 s of grace), a session's final count and pages written once it closes."""
    topology = Topology()
    (
        topology.stream("clicks", key=STR, value=JSON)
        .group_by_key()
        .windowed_by(sessions(30_000, grace=10_000))
        .aggregate(
            lambda: {"views": 0, "pages": []},
            lambda _user, click, session: {
                "views": session["views"] + 1,
                "pages": [*session["pages"][-4:], click["page"]],
            },
            merger=lambda _user, older, newer: {
                "views": older["views"] + newer["views"],
                "pages": newer["pages"],
            },
            store="sessions",
        )
        .suppress(until_window_closes())
        .to_stream()
        .map(
            lambda window, session: (window.key, {"start": window.start, "end": window.end, **session}),
            key=STR,
        )
        .to("sessions", value=JSON)
    )
    return topology


def _enrich(click: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    click["country"] = user["country"]  # deserialized for this record alone: changed in place
    click["tier"] = user["tier"]
    return click


def _stream_table_join() -> Topology:
    """A stream-table join (bench/topologies/click_enrichment.py's shape): each click of a user
    the table holds, with the user's country and tier; the table is only looked up (tailed)."""
    topology = Topology()
    users = topology.table("users", key=STR, value=JSON, store="users")
    topology.stream("clicks", key=STR, value=JSON).join(users, _enrich).to("clicks-enriched", value=JSON)
    return topology


def _clicks(records: int) -> list[Message]:
    """Clicks (``{"user_id", "timestamp", "page", "bot", "n"}``) of ``USERS`` users on ``PAGES`` pages, one in
    ten a bot's, 1 ms apart in record time but one in 50 up to 5 s behind and one in 500 up to
    30 s (late past a 10 s grace), seeded."""
    rng = random.Random(1)
    out = []
    for i in range(records):
        user = f"user-{rng.randrange(USERS)}"
        behind = rng.random()
        ts = (
            BASE_MS
            + i
            - (rng.randrange(30_000) if behind < 0.002 else rng.randrange(5_000) if behind < 0.02 else 0)
        )
        click = {
            "user_id": user,
            "timestamp": ts // 1000,  # the click counter's model reads it
            "page": f"page-{rng.randrange(PAGES)}",
            "bot": rng.random() < 0.1,
            "n": i,
        }
        out.append(
            Message(
                topic="clicks",
                partition=0,
                offset=i,
                key=user.encode(),
                value=b"".join((orjson.dumps(click), b"")),  # right-sized, as a consumed value is
                timestamp=(1, ts),
            )
        )
    return out


def _users(store: KeyValueStore) -> None:
    """The users table (a tailed table: the restore thread would have written it); every 20th
    user has no row, so the inner join drops that user's clicks."""
    rng = random.Random(2)
    countries = ("de", "fr", "nl", "pl", "es", "it", "se", "us", "br", "jp", "in", "ng")
    items = [
        (
            f"user-{i}".encode(),
            orjson.dumps(
                {
                    "user_id": f"user-{i}",
                    "country": rng.choice(countries),
                    "tier": rng.choice(["free", "pro"]),
                }
            ),
        )
        for i in range(USERS)
        if i % 20
    ]
    store.write(items, 0)
    if isinstance(store, RocksDBStore):  # from the memtable to a table file, as a restored table is
        store._db.flush()


@dataclass(frozen=True)
class Scenario:
    build: Callable[[], Topology]
    fill: Callable[[str, KeyValueStore], None] = lambda _name, _store: None  # a tailed table's rows


SCENARIOS = {
    "click-counter": Scenario(_click_counter),
    "windowed-repartition": Scenario(_windowed_repartition),
    "sessions": Scenario(_sessions),
    "hopping": Scenario(_hopping),
    "sliding": Scenario(_sliding),
    "stream-table-join": Scenario(
        _stream_table_join, fill=lambda name, store: _users(store) if name == "users" else None
    ),
}


class _Counting:
    """The task's ``send``: counts records, keeps those for a repartition topic (the next task's input)."""

    def __init__(self, repartition: set[str]) -> None:
        self.repartition = repartition
        self.kept: list[tuple[str, bytes | None, bytes | None, int, Any]] = []
        self.sent = 0

    def __call__(  # noqa: PLR0917 - context.Send
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int | None,
        timestamp: int,
        headers: Any,
    ) -> None:
        self.sent += 1
        if topic in self.repartition:  # a copy, as librdkafka takes one: orjson's bytes hold 4 KiB each
            self.kept.append(
                (topic, key, None if value is None else b"".join((value, b"")), timestamp, headers)
            )


class _Run:
    """One topology's tasks (partition 0 of each sub-topology) over fresh RocksDB stores."""

    def __init__(self, scenario: Scenario, work: Path, *, fast: bool) -> None:
        built = scenario.build().build()
        self.send = _Counting({f"bench-{t}" for t in built.repartition_topics})
        self.dead: list[str] = []
        self.tasks: list[Task] = []
        self.offsets: dict[str, int] = {}
        for sub in built.subtopologies:
            names = [s.name for s in sub.stores] + [t.store.name for t in sub.tables]
            stores: dict[str, KeyValueStore] = {}
            for name in names:
                stores[name] = RocksDBStore(work / f"{sub.index}" / name)
                scenario.fill(name, stores[name])
            self.tasks.append(
                Task(
                    TaskId(sub.index, 0),
                    sub,
                    application_id="bench",
                    stores=stores,
                    send=self.send,
                    gate=OpenGate(),
                    caching=True,
                    dead_letter=lambda exc, stage, _msg: self.dead.append(f"{stage}: {exc}"),
                    cache_budget=CacheBudget(10 * 1024 * 1024),
                    fuse_aggregations=fast,
                )
            )

    def chunk(self, messages: list[Message]) -> float:
        """Process one commit interval's input through every task and commit; the CPU seconds it took.

        A run of input at a time goes through the first task, then what it sent to its
        repartition topic through the next, as a worker interleaves them; turning sent
        records into consumed ones is not timed (the consumer does that in the worker)."""
        cpu = 0.0
        for low in range(0, len(messages), RUN):
            batch = messages[low : low + RUN]
            for n, task in enumerate(self.tasks):
                if n > 0:  # the previous task's repartition records, as the consumer would hand them over
                    batch = self._consumed(self.send.kept)
                    self.send.kept = []
                started = time.process_time()
                i = 0
                while i < len(batch):
                    i = task.process_run(batch, i)
                cpu += time.process_time() - started
        started = time.process_time()
        for task in self.tasks:
            task.flush()
            task.begin_commit()
            task.committed_ok({(store.changelog_topic, 0): 1 for store in task.stores.values()})
        return cpu + time.process_time() - started

    def _consumed(self, kept: list[tuple[str, bytes | None, bytes | None, int, Any]]) -> list[Message]:
        out = []
        for topic, key, value, timestamp, headers in kept:
            offset = self.offsets.get(topic, 0)
            self.offsets[topic] = offset + 1
            out.append(
                Message(
                    topic=topic,
                    partition=0,
                    offset=offset,
                    key=key,
                    value=value,
                    timestamp=(1, timestamp),
                    headers=headers,
                )
            )
        return out

    def close(self) -> None:
        for task in self.tasks:
            task.close()


def _measure(scenario: Scenario, messages: list[Message], *, fast: bool, profile: bool) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        run = _Run(scenario, Path(tmp), fast=fast)
        profiler = cProfile.Profile() if profile else None
        cpu = 0.0
        try:
            for start in range(0, len(messages), COMMIT_EVERY):
                chunk = messages[start : start + COMMIT_EVERY]
                if profiler is not None:
                    profiler.enable()
                cpu += run.chunk(chunk)
                if profiler is not None:
                    profiler.disable()
        finally:
            run.close()
        out = {
            "us_per_record": round(cpu / len(messages) * 1e6, 3),
            "sent_per_record": run.send.sent / len(messages),
        }
        out["dead_letters"] = len(run.dead)
        if profiler is not None:
            stats = pstats.Stats(profiler)
            py = c = 0
            for (filename, _line, name), (_cc, calls, *_rest) in stats.stats.items():  # type: ignore[attr-defined]
                if name in {"disable", "enable"} and filename == "~":
                    continue
                if filename == "~":
                    c += calls
                else:
                    py += calls
            # the bench's own frames are not the worker's: chunk, _consumed, the send counter
            own = sum(
                calls
                for (filename, _line, name), (_cc, calls, *_rest) in stats.stats.items()  # type: ignore[attr-defined]
                if filename == __file__ and name in {"chunk", "_consumed", "__call__"}
            )
            out["py_calls_per_record"] = round((py - own) / len(messages), 2)
            out["c_calls_per_record"] = round(c / len(messages), 2)
        return out


def _instructions(name: str, path: str, records: int) -> float:
    """Instructions per record of one topology's path, counted by valgrind (see the module's docstring)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        sys.exit("--instructions needs valgrind: install it (Debian/Ubuntu: apt-get install valgrind)")
    small = records // 4
    totals = []
    for n in (small, records):
        done = subprocess.run(
            [
                *(valgrind, "--tool=cachegrind", "--cache-sim=no", "--cachegrind-out-file=/dev/null"),
                *(sys.executable, __file__, "in-process-count", name, path, str(records), str(n)),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},  # str hashes, hence dict probes, alike in both runs
            check=False,
        )
        found = re.search(r"I\s+refs:\s+([\d,]+)", done.stderr)
        if done.returncode != 0 or found is None:
            sys.exit(f"valgrind's run of {name} ({path}, {n} records) failed:\n{done.stderr[-2000:]}")
        totals.append(int(found.group(1).replace(",", "")))
    return (totals[1] - totals[0]) / (records - small)


def _count_child(argv: list[str]) -> None:
    """Under valgrind: ``records`` clicks made, the first ``n`` processed (what ``_instructions`` counts)."""
    name, path, records, n = argv[0], argv[1], int(argv[2]), int(argv[3])
    keep_heap_top()
    settle_garbage_collector()
    messages = _clicks(records)  # made whole in both runs: only the processing differs
    _measure(SCENARIOS[name], messages[:n], fast=path == "fast", profile=False)


def in_process(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(
        prog="cpu_profile.py in-process", description="CPU and calls per record, no broker"
    )
    parser.add_argument(
        "--topology", default=",".join(SCENARIOS), help=f"comma-separated: {', '.join(SCENARIOS)}"
    )
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument(
        "--profile-records", type=int, default=50_000, help="records of the call-counting run"
    )
    parser.add_argument("--paths", default="fast,general")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions per record (needs valgrind)"
    )
    parser.add_argument("--instruction-records", type=int, default=40_000)
    args = parser.parse_args(argv)
    keep_heap_top()  # the worker's memory settings (runtime/memory.py)
    settle_garbage_collector()
    results: dict[str, dict[str, dict[str, Any]]] = {}
    for name in args.topology.split(","):
        scenario = SCENARIOS[name]
        messages = _clicks(args.records)
        results[name] = {}
        paths = args.paths.split(",")
        # the paths alternate, so that a change of the machine's speed meets each of them alike
        runs_of: dict[str, list[dict[str, float]]] = {path: [] for path in paths}
        for _ in range(args.repeat):
            for path in paths:
                runs_of[path].append(_measure(scenario, messages, fast=path == "fast", profile=False))
        for path in paths:
            fast = path == "fast"
            runs = runs_of[path]
            best = min(runs, key=lambda r: r["us_per_record"])
            calls = _measure(scenario, messages[: args.profile_records], fast=fast, profile=True)
            row: dict[str, Any] = {
                "us_per_record": best["us_per_record"],
                "us_per_record_runs": [r["us_per_record"] for r in runs],
                "py_calls_per_record": calls["py_calls_per_record"],
                "c_calls_per_record": calls["c_calls_per_record"],
                "sent_per_record": round(best["sent_per_record"], 3),
                "dead_letters": best["dead_letters"],
            }
            if args.instructions:
                row["instructions_per_record"] = round(_instructions(name, path, args.instruction_records))
            results[name][path] = row
            counted = f"{row['instructions_per_record']:>9,} instr/rec" if args.instructions else ""
            print(
                f"{name:<22}{path:<9}{row['us_per_record']:>8.2f} µs/rec (runs {row['us_per_record_runs']})"
                f"{row['py_calls_per_record']:>8.2f} py calls/rec{row['c_calls_per_record']:>8.2f} C calls/rec"
                f"{row['sent_per_record']:>8.3f} sent/rec{counted}",
                flush=True,
            )
    if args.json is not None:
        args.json.write_text(orjson.dumps(results, option=orjson.OPT_INDENT_2).decode())


def main() -> None:
    if sys.argv[1:2] == ["in-process"]:
        in_process(sys.argv[2:])
        return
    if sys.argv[1:2] == ["in-process-count"]:
        _count_child(sys.argv[2:])
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=os.environ.get("BATON_KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--guarantee", default="at_least_once")
    parser.add_argument("--json", type=Path, default=Path("bench/cpu_profile.json"))
    args = parser.parse_args()
    py_spy = _py_spy()
    source = f"profile-clicks-{uuid.uuid4().hex[:6]}"
    sink = f"{source}-counts"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    for topic in (source, sink):
        admin.create_topics([NewTopic(topic, 8, 1)])[topic].result(30)
    load_user_clicks(args.bootstrap, source, args.events, args.users)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        app = f"profile-{uuid.uuid4().hex[:6]}"
        worker = WorkerProcess(
            CLICK_COUNTER,
            bootstrap=args.bootstrap,
            application_id=app,
            state_dir=work / "state",
            log_path=work / "worker.log",
            guarantee=args.guarantee,
            env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
        ).start()
        raw = work / "stacks.txt"
        try:
            assert worker.proc is not None
            spy = subprocess.Popen(
                [
                    *(str(py_spy), "record", "--pid", str(worker.proc.pid), "--format", "raw"),
                    *("--rate", "250", "--threads", "--output", str(raw), "--nonblocking"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            started = time.monotonic()
            wait_for(
                "all events consumed",
                lambda: worker.metric("baton_records_consumed_total") >= args.events,
                600,
                every=0.25,
            )
            seconds = time.monotonic() - started
            spy.send_signal(2)  # SIGINT: py-spy writes what it sampled and exits
            spy.wait(60)
        finally:
            worker.stop(60)
        result = {"guarantee": args.guarantee, "events": args.events, "seconds": round(seconds, 1)}
        result |= analyse(raw)
    print(f"{args.guarantee}, {args.events:,} events, {result['samples']:,} samples of the processing thread")
    print(f"{'stage':<58}{'share %':>9}")
    for name, share in result["stages"].items():
        print(f"{name:<58}{share:>9}")
    print(f"\n{'leaf function (line)':<90}{'share %':>9}")
    for name, share in result["top_leaves"].items():
        print(f"{name[:88]:<90}{share:>9}")
    args.json.write_text(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())


if __name__ == "__main__":
    main()
