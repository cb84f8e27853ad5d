"""Where a worker's time goes on the per-record path: py-spy samples of the click counter, by stage.

    python bench/cpu_profile.py --bootstrap 127.0.0.1:9092 [--events 1000000]
                                [--guarantee at_least_once] [--json bench/cpu_profile.json]

The worker runs exactly as in ``bench/throughput.py`` (the same input, one process); py-spy
(installed on first use under ``~/.cache/baton/py-spy-<version>``) samples it from its first
processed record to its last. Each sample is charged to the innermost frame that names a
stage (the rules below, first match from the leaf up; a sample in the click counter's
fused loop, ``runtime/fused.py``, by the text of its line), so the table adds up to 100 % of
the processing thread's samples; the other threads (restore, membership, HTTP) are reported
apart. The top leaf functions are printed too: the stages say where to look, the leaves
what to change.
"""

from __future__ import annotations

import argparse
import collections
import functools
import os
import re
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import orjson
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from baton.testing import WorkerProcess, wait_for

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


def main() -> None:
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
