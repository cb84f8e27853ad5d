"""Scale-out under steady input: a 4th worker joins 3; how long does any partition's output pause?

    python bench/scaleout.py [--bootstrap 127.0.0.1:29092] [--keys 2000000] [--partitions 12]
                             [--rate 1200] [--standbys 0 1] [--json PATH]

Two ways to hand the newcomer its share, side by side, for each standby setting:

* **warmups** (Baton's default, Kafka Streams' KIP-441): the newcomer first builds copies
  of the tasks it will own (at most ``max.warmup.replicas`` at a time); a probing
  rebalance hands it each active only once its copy is within ``acceptable.recovery.lag``,
  and the new owner resumes from that warm copy;
* **at once** (``--acceptable-recovery-lag`` as large as it goes: every member counts as
  caught up, so the assignor moves actives as soon as the member joins, as a stock
  assignor does): the newcomer restores each task it takes from scratch while the
  partition waits.

The click counter runs with exactly-once on ``--keys`` keys of state. A steady input
(``--rate`` records/s over all partitions) runs throughout. The sink topic stamps every
record with the broker's append time (``message.timestamp.type=LogAppendTime``), and the
sink partition of a count is the input partition of its click (both use the Java
client's partitioner). A partition's **output pause** is the longest gap between two
consecutive appends to it, from 5 s before the newcomer starts until 5 s after the group
is balanced. The same measure over the 5 s before the join is the baseline: what a
commit interval and batching give when nothing moves.

The probing rebalance interval is 5 s here (Kafka Streams' and Baton's default is 10 min),
so a scale-out ends within a minute; the interval adds to how long the newcomer takes to
get its actives, not to any pause.

Prints a table and writes JSON (default ``bench/results/scaleout-<time>.json``).
"""

from __future__ import annotations

import argparse
import datetime
import itertools
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from baton.testing import (
    SteadyInput,
    WorkerProcess,
    end_offsets,
    group_committed,
    read_all,
    wait_for,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))

from batondev.paths import CLICK_COUNTER
from batondev.standbys import describe, labelled_metric, load_clicks, roles

# nobody is killed here: a long session keeps a heartbeat that a loaded machine delays from
# dropping a member, whose tasks would then restore from scratch (seen in CI at 6 s)
SESSION_MS = 30000
PROBING_MS = 5000
AT_ONCE = sys.maxsize  # every member counts as caught up: no warmups
MARGIN_S = 5.0
MODES = {"warmups": None, "at once": AT_ONCE}


def _max_gaps(times: dict[int, list[float]], start: float, end: float) -> dict[int, float]:
    """Per partition, the longest time without an append within [start, end] (edges count as appends)."""
    out = {}
    for partition, stamps in times.items():
        inside = [start, *(t for t in stamps if start < t < end), end]
        out[partition] = max(b - a for a, b in itertools.pairwise(inside))
    return out


def run_setting(
    *,
    bootstrap: str,
    source: str,
    partitions: int,
    standbys: int,
    mode: str,
    keys: int,
    rate: int,
    workdir: Path,
    acceptable_lag: int | None = None,
) -> dict[str, Any]:
    app = f"bench-scaleout-sb{standbys}-{mode.replace(' ', '')}-{uuid.uuid4().hex[:6]}"
    sink = f"{app}-counts"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topic = NewTopic(sink, partitions, 1, config={"message.timestamp.type": "LogAppendTime"})
    admin.create_topics([topic])[sink].result(30)
    extra = [
        "--num-standby-replicas", str(standbys),
        "--probing-rebalance-interval-ms", str(PROBING_MS),
        "-X", f"consumer.session.timeout.ms={SESSION_MS}",
        "-X", "consumer.heartbeat.interval.ms=1000",
    ]  # fmt: skip
    lag = MODES[mode] if MODES[mode] is not None else acceptable_lag
    if lag is not None:
        extra += ["--acceptable-recovery-lag", str(lag)]
    workers = [
        WorkerProcess(
            CLICK_COUNTER,
            bootstrap=bootstrap,
            application_id=app,
            state_dir=workdir / app / f"s{i}",
            log_path=workdir / f"{app}-w{i}.log",
            instance_id=f"w{i}",
            env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
            extra_args=extra,
        )
        for i in range(4)
    ]
    label = f"standby {standbys}, {mode}"
    try:
        for w in workers[:3]:
            w.start()
        t0 = time.monotonic()
        ends = end_offsets(bootstrap, source)
        wait_for(
            "load not processed",
            lambda: group_committed(bootstrap, app, source, partitions) == ends,
            1800,
            every=1,
        )
        wait_for("3 workers not stable", lambda: describe(bootstrap, app, expect_members=3), 120)
        print(f"{label}: {keys:,} keys loaded in {time.monotonic() - t0:.1f}s", flush=True)
        with SteadyInput(bootstrap, source, rate=rate, users=[f"live{i}" for i in range(50 * partitions)]):
            time.sleep(MARGIN_S * 2)
            before = end_offsets(bootstrap, sink)
            time.sleep(MARGIN_S)
            joined = time.time()
            newcomer = workers[3].start()
            share = partitions // 4

            def balanced() -> bool:
                r = roles(newcomer)
                group = describe(bootstrap, app, expect_members=4)
                mine = next((m for m in group or [] if m.identity == "w3"), None)
                return (
                    len(r["active"]) >= share
                    and not r["warmup"]
                    and mine is not None
                    and len(mine.partitions) >= share
                    and len(_first_records(newcomer)) >= share
                )

            wait_for(f"{label}: the newcomer never got its share", balanced, 600, every=0.5)
            done = time.time()
            time.sleep(MARGIN_S)
        wait_for("input not processed", lambda: group_committed(bootstrap, app, source, partitions) == end_offsets(bootstrap, source), 120)  # fmt: skip
        appended: dict[int, list[float]] = {p: [] for p in range(partitions)}
        for r in read_all(bootstrap, sink, start=before):
            appended[r.partition].append(r.timestamp / 1000)
        baseline = _max_gaps(appended, joined - MARGIN_S, joined)
        during = _max_gaps(appended, joined - MARGIN_S, done + MARGIN_S)
        starts = _starts(newcomer)
        first = _first_records(newcomer)
        moved = sorted(first)
        result = {
            "standbys": standbys,
            "mode": mode,
            "tasks_moved": len(moved),
            "starts": {
                kind: sum(1 for k in starts.values() if k == kind) for kind in sorted(set(starts.values()))
            },
            "warmups_before_first_active": _warmups_before_first_active(newcomer),
            "join_to_first_active_s": round(min(first.values()) - joined, 2) if first else None,
            "join_to_balanced_s": round(done - joined, 2),
            "max_pause_s": round(max(during.values()), 3),
            "max_pause_moved_s": round(max(during[p] for p in moved), 3) if moved else None,
            "max_pause_unmoved_s": round(max(v for p, v in during.items() if p not in moved), 3),
            "baseline_max_gap_s": round(max(baseline.values()), 3),
            "pause_by_partition_s": {str(p): round(v, 3) for p, v in sorted(during.items())},
            "restored_records": newcomer.restored(),
            "group_sizes_after_join": _group_sizes(workers, joined),
            "task_starts": labelled_metric(newcomer, "baton_task_starts_total"),
        }
        print(
            f"  moved {moved}, started {result['starts']}; longest pause {result['max_pause_s']} s "
            f"(baseline {result['baseline_max_gap_s']} s); balanced {result['join_to_balanced_s']} s after the join",
            flush=True,
        )
        return result
    finally:
        for w in workers:
            if w.alive:
                w.stop(60)


def _first_records(worker: WorkerProcess) -> dict[int, float]:
    """Partition -> wall time of the first record the worker processed for it (this run)."""
    out: dict[int, float] = {}
    for line in worker.logs():
        if line.get("msg") == "first record processed":
            out.setdefault(int(str(line["partition"])), _wall(str(line["ts"])))
    return out


def _warmups_before_first_active(worker: WorkerProcess) -> int:
    """Warmup tasks the leader gave the worker before it started its first active task."""
    seen: set[str] = set()
    for line in worker.logs():
        if line.get("msg") == "active task started":
            break
        if line.get("msg") == "assignment received":
            warmup = line.get("warmup")
            seen |= {str(t) for t in warmup} if isinstance(warmup, list) else set()
    return len(seen)


def _group_sizes(workers: list[WorkerProcess], since: float) -> list[int]:
    """Members in each assignment a leader computed after ``since``: a size below four means a
    member dropped out, and its tasks restored wherever they went."""
    sizes: list[tuple[float, int]] = []
    for w in workers:
        for line in w.logs():
            if line.get("msg") == "assignment computed" and _wall(str(line["ts"])) >= since:
                sizes.append((_wall(str(line["ts"])), int(str(line["members"]))))
    return [n for _, n in sorted(sizes)]


def _starts(worker: WorkerProcess) -> dict[int, str]:
    return {
        int(str(x["partition"])): str(x["kind"])
        for x in worker.logs()
        if x.get("msg") == "active task started"
    }


def _wall(ts: str) -> float:
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


def _table(results: list[dict[str, Any]]) -> str:
    lines = [
        "| standbys | newcomer gets actives | tasks moved | how they started | longest output pause, s: any "
        "| moved | not moved | baseline gap, s | join to balanced, s | records the newcomer restored |",
        "|---:|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        started = ", ".join(f"{n} {k}" for k, n in r["starts"].items())
        lines.append(
            f"| {r['standbys']} | {r['mode']} | {r['tasks_moved']} | {started} | {r['max_pause_s']} "
            f"| {r['max_pause_moved_s']} | {r['max_pause_unmoved_s']} | {r['baseline_max_gap_s']} "
            f"| {r['join_to_balanced_s']} | {r['restored_records']:,} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bootstrap", default=os.environ.get("BATON_KAFKA_BOOTSTRAP", "127.0.0.1:29092"))
    parser.add_argument("--keys", type=int, default=2_000_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--rate", type=int, default=1200, help="steady input, records/s over all partitions")
    parser.add_argument("--standbys", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--modes", nargs="+", choices=sorted(MODES), default=list(MODES))
    parser.add_argument(
        "--acceptable-recovery-lag",
        type=int,
        default=None,
        help="for the warmups mode (the worker's default if unset)",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=None, help="keep state and worker logs here")
    args = parser.parse_args()
    out = args.json or Path("bench/results") / f"scaleout-{time.strftime('%Y%m%d-%H%M%S')}.json"
    source = f"bench-scaleout-clicks-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(source, args.partitions, 1)])[source].result(30)
    t0 = time.monotonic()
    load_clicks(args.bootstrap, source, args.keys)
    print(f"produced {args.keys:,} keys in {time.monotonic() - t0:.1f}s", flush=True)
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        for standbys in args.standbys:
            for mode in args.modes:
                results.append(
                    run_setting(
                        bootstrap=args.bootstrap,
                        source=source,
                        partitions=args.partitions,
                        standbys=standbys,
                        mode=mode,
                        keys=args.keys,
                        rate=args.rate,
                        workdir=workdir,
                        acceptable_lag=args.acceptable_recovery_lag,
                    )
                )
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(
                    orjson.dumps(
                        {
                            "keys": args.keys,
                            "partitions": args.partitions,
                            "rate": args.rate,
                            "cpus": os.cpu_count(),
                            "probing_rebalance_interval_ms": PROBING_MS,
                            "acceptable_recovery_lag": args.acceptable_recovery_lag,
                            "guarantee": "exactly_once_v2",
                            "results": results,
                        },
                        option=orjson.OPT_INDENT_2,
                    )
                )
    admin.delete_topics([source])
    print()
    print(
        f"3 -> 4 workers, {args.keys:,} keys over {args.partitions} partitions, exactly-once, {args.rate} records/s "
        "of steady input; output pause = longest gap between appends to one sink partition"
    )
    print(_table(results))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
