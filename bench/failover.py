"""Failover with 0, 1 and 2 standbys, 3 and 6 workers: which tasks are promoted, and how fast each resumes.

    python bench/failover.py [--bootstrap 127.0.0.1:29092] [--keys 10000000] [--partitions 12]
                             [--workers 3 6] [--standbys 0 1 2] [--trials 3]
                             [--acceptable-recovery-lag 10000] [--json PATH]

For each worker count and ``num.standby.replicas``: start the click-counter workers
(exactly-once), load the keys (10 M by default: a full restore of one task then replays
~830,000 changelog records, tens of seconds for a member that takes several), then per
trial SIGKILL one worker (round robin) and measure, for every task it owned, from its
survivors' log lines:

* **promoted or restored**: whether the new owner resumed from a standby (Baton's
  assignor hands a dead member's task to a caught-up standby holder) or replayed the
  task's changelog from scratch;

* **resume after assignment**: from the group handing a partition to its new owner (the
  assign callback) to the first record that owner processed for it (restore included):
  the ``baton_assignment_to_first_record_seconds`` metric;
* **resume after kill**, per task: from the SIGKILL to that first record (adds failure
  detection, i.e. ``session.timeout.ms``, 6 s here);
* **restored records** and **restore throughput** (records a worker restored / seconds
  its restores took).

A steady trickle of new input keeps every partition busy so "first record" is seen within
~20 ms of the partition being ready. Between trials the victim restarts (same instance
id and state dir) and the bench waits until every worker is ready, no warmup is left,
standbys are caught up and released task folders are cleaned (``--state-cleanup-delay-ms``),
so every trial starts from the same kind of placement.

``--acceptable-recovery-lag`` must stay below one partition's changelog length (the
default 10,000 is far below the ~830,000 of 10 M keys). Above it, a survivor with no
copy at all counts as caught up, and when the victim's standbys sit unevenly on the
survivors (3 and 1 of 4), the assignor balances by giving one task to the member without
a copy, which then restores it from scratch: right for such short changelogs, but not the
failover this bench measures. Small runs pass a small lag.

Prints a table and writes JSON (default ``bench/results/failover-<time>.json``).
"""

from __future__ import annotations

import argparse
import datetime
import math
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from baton.testing import SteadyInput, WorkerProcess, end_offsets, group_committed, wait_for
from baton.worker.state import statedir

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))

from batondev.paths import CLICK_COUNTER
from batondev.standbys import (
    describe,
    hosted_standbys,
    labelled_metric,
    load_clicks,
    owned_tasks,
)

SESSION_MS = 6000
CLEANUP_MS = 8000
PROBING_MS = 5000  # warmups of the restarted victim are probed often, so trials do not wait 10 min
CAUGHT_UP = 50  # standby lag in offsets: what the active task's open transaction may hold


def _wall(line: dict[str, object]) -> float:
    ts = str(line["ts"])
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


def _percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (with 5 trials, p99 is the worst trial)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


class Cluster:
    """The click-counter workers of one application, with one worker count and standby setting."""

    def __init__(  # noqa: PLR0917 (one value per dimension of the bench)
        self,
        bootstrap: str,
        source: str,
        partitions: int,
        members: int,
        standbys: int,
        workdir: Path,
        acceptable_lag: int,
    ) -> None:
        self.bootstrap, self.source, self.standbys = bootstrap, source, standbys
        self.partitions, self.members = partitions, members
        self.app = f"bench-failover-w{members}-sb{standbys}-{uuid.uuid4().hex[:6]}"
        self.sink = f"{self.app}-counts"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future resolves
        admin.create_topics([NewTopic(self.sink, partitions, 1)])[self.sink].result(30)
        self.state = {f"w{i}": workdir / self.app / f"s{i}" for i in range(members)}
        self.workers = {
            name: WorkerProcess(
                CLICK_COUNTER,
                bootstrap=bootstrap,
                application_id=self.app,
                state_dir=self.state[name],
                log_path=workdir / f"{self.app}-{name}.log",
                instance_id=name,
                env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": self.sink},
                extra_args=[
                    "--num-standby-replicas",
                    str(standbys),
                    "--acceptable-recovery-lag",
                    str(acceptable_lag),
                    "--state-cleanup-delay-ms",
                    str(CLEANUP_MS),
                    "--probing-rebalance-interval-ms",
                    str(PROBING_MS),
                    "-X",
                    f"consumer.session.timeout.ms={SESSION_MS}",
                    "-X",
                    "consumer.heartbeat.interval.ms=1000",
                ],
            )
            for name in self.state
        }

    def start(self) -> None:
        for w in self.workers.values():
            w.start()

    def stop(self) -> None:
        for w in self.workers.values():
            if w.alive:
                w.stop(60)

    def settled(self) -> dict[str, list[int]]:
        """Wait until all are ready, the group is stable, no warmups, standbys caught up, stale folders cleaned."""
        for w in self.workers.values():
            w.wait_ready(300)
        owned: dict[str, list[int]] = {}
        why = ["group not stable"]

        def check() -> bool:
            members = describe(self.bootstrap, self.app, expect_members=self.members)
            if members is None:
                why[0] = "group not stable"
                return False
            owned.clear()
            owned.update(owned_tasks(members))
            for name, w in self.workers.items():
                hosted = hosted_standbys(w)
                lag = labelled_metric(w, "baton_standby_lag")
                if len(lag) != len(hosted) or any(v > CAUGHT_UP for v in lag.values()):
                    why[0] = f"{name}: standbys {sorted(hosted)} lag {lag}"
                    return False
                folders = {t.partition for t in statedir.task_dirs(self.state[name] / self.app)}
                if folders != set(owned[name]) | hosted:  # released folders are gone
                    why[0] = (
                        f"{name}: folders {sorted(folders)}, owns {owned[name]}, standbys {sorted(hosted)}"
                    )
                    return False
            total = sum(len(hosted_standbys(w)) for w in self.workers.values())
            why[0] = f"{total} standbys and warmups hosted"
            return total == self.partitions * self.standbys

        try:
            wait_for("cluster did not settle", check, 600, every=0.5)
        except TimeoutError:
            raise TimeoutError(f"cluster did not settle: {why[0]}") from None
        return dict(owned)

    def trial(self, victim: str, owned: dict[str, list[int]]) -> dict[str, Any]:
        moved = owned[victim]
        survivors = {n: w for n, w in self.workers.items() if n != victim}
        seen = {n: len(w.logs()) for n, w in survivors.items()}
        killed_at = time.time()
        self.workers[victim].kill(signal.SIGKILL)
        self.workers[victim].wait(30)
        first: dict[int, dict[str, object]] = {}
        kinds: dict[
            int, str
        ] = {}  # how the last owner started it: promoted, resumed (leftover copy), restored
        restores: dict[str, list[dict[str, object]]] = {}

        def resumed() -> bool:
            for name, w in survivors.items():
                lines = w.logs()[seen[name] :]
                restores[name] = [
                    x
                    for x in lines
                    if x.get("msg") == "store restored" and int(str(x["task"]).split("_")[1]) in moved
                ]
                for x in lines:
                    if x.get("msg") == "first record processed" and x.get("partition") in moved:
                        first.setdefault(int(str(x["partition"])), {**x, "worker": name})
                    if x.get("msg") == "active task started" and x.get("partition") in moved:
                        kinds[int(str(x["partition"]))] = str(x["kind"])
            return len(first) == len(moved)

        wait_for(f"partitions of {victim} never resumed", resumed, 300, every=0.2)
        self.workers[victim].start()
        promoted = {p for p, kind in kinds.items() if kind == "promoted"}
        restored_by = {
            int(str(x["task"]).split("_")[1]): int(str(x["restored"])) for xs in restores.values() for x in xs
        }
        partitions = [
            {
                "partition": p,
                "promoted": p in promoted,
                "owner": first[p]["worker"],
                "start": kinds.get(p, "?"),
                "resume_after_assignment_s": float(str(first[p]["seconds_since_assignment"])),
                "resume_after_kill_s": round(_wall(first[p]) - killed_at, 3),
                "restored_records": restored_by.get(p, 0),
            }
            for p in sorted(first)
        ]
        rates = []
        for xs in restores.values():  # one restore consumer per worker: full restores over their wall time
            full = [x for x in xs if int(str(x["task"]).split("_")[1]) not in promoted]
            records = sum(int(str(x["restored"])) for x in full)
            seconds = max((float(str(x["seconds"])) for x in full), default=0.0)
            if records and seconds > 0:
                rates.append(records / seconds)
        return {
            "victim": victim,
            "partitions": partitions,
            "promoted": sum(1 for p in partitions if p["start"] == "promoted"),
            "resumed": sum(1 for p in partitions if p["start"] == "resumed"),
            "full_restores": sum(1 for p in partitions if p["start"] not in {"promoted", "resumed"}),
            "resume_after_kill_s": max(float(str(p["resume_after_kill_s"])) for p in partitions),
            "restored_records": sum(restored_by.values()),
            "restore_records_per_s": round(sum(rates)) if rates else None,
        }


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": _percentile(values, 50) if values else None,
        "p99": _percentile(values, 99) if values else None,
    }


def run_setting(
    *,
    bootstrap: str,
    source: str,
    partitions: int,
    members: int,
    standbys: int,
    keys: int,
    trials: int,
    workdir: Path,
    acceptable_lag: int,
) -> dict[str, Any]:
    cluster = Cluster(bootstrap, source, partitions, members, standbys, workdir, acceptable_lag)
    cluster.start()
    label = f"{members} workers, standby {standbys}"
    try:
        t0 = time.monotonic()
        ends = end_offsets(bootstrap, source)
        wait_for(
            "load not processed",
            lambda: group_committed(bootstrap, cluster.app, source, partitions) == ends,
            1800,
            every=1,
        )
        owned = cluster.settled()
        print(f"{label}: {keys:,} keys loaded and settled in {time.monotonic() - t0:.1f}s", flush=True)
        results = []
        with SteadyInput(bootstrap, source, rate=400, users=[f"live{i}" for i in range(256)]):
            for n in range(trials):
                victims = [name for name in sorted(owned) if owned[name]]
                result = cluster.trial(victims[n % len(victims)], owned)
                results.append(result)
                parts = ", ".join(
                    f"{p['partition']}:{p['start']}:{p['resume_after_kill_s']}s" for p in result["partitions"]
                )
                print(
                    f"  trial {n + 1}: killed {result['victim']}; per task (how it started: seconds from the "
                    f"kill to its first record) {parts}; restored {result['restored_records']:,} records",
                    flush=True,
                )
                if n < trials - 1:  # the next trial starts from a settled group
                    owned = cluster.settled()
    finally:
        cluster.stop()
    moved = [p for r in results for p in r["partitions"]]
    rates = [r["restore_records_per_s"] for r in results if r["restore_records_per_s"]]
    return {
        "workers": members,
        "num_standby_replicas": standbys,
        "trials": results,
        "tasks_moved": len(moved),
        "promoted": sum(r["promoted"] for r in results),
        "resumed": sum(r["resumed"] for r in results),
        "full_restores": sum(r["full_restores"] for r in results),
        "resume_after_kill_s": _spread([float(p["resume_after_kill_s"]) for p in moved]),
        "resume_after_kill_promoted_s": _spread(
            [float(p["resume_after_kill_s"]) for p in moved if p["start"] == "promoted"]
        ),
        "resume_after_kill_restored_s": _spread(
            [float(p["resume_after_kill_s"]) for p in moved if p["start"] != "promoted"]
        ),
        "resume_after_assignment_s": _spread([float(p["resume_after_assignment_s"]) for p in moved]),
        "restored_records_mean": round(statistics.mean(r["restored_records"] for r in results)),
        "restore_records_per_s": round(statistics.median(rates)) if rates else None,
    }


def _table(settings: list[dict[str, Any]]) -> str:
    def cell(x: dict[str, Any]) -> str:
        return f"{x['p50']:.2f} / {x['p99']:.2f}" if x["n"] else "-"

    lines = [
        "| workers | standbys | tasks moved | promoted | resumed (leftover copy) | full restores "
        "| kill to first record, s, p50 / p99: all | promoted | restored | restored records / trial "
        "| restore rec/s |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in settings:
        rate = f"{s['restore_records_per_s']:,}" if s["restore_records_per_s"] else "-"
        lines.append(
            f"| {s['workers']} | {s['num_standby_replicas']} | {s['tasks_moved']} | {s['promoted']} | {s['resumed']} "
            f"| {s['full_restores']} | {cell(s['resume_after_kill_s'])} | {cell(s['resume_after_kill_promoted_s'])} "
            f"| {cell(s['resume_after_kill_restored_s'])} | {s['restored_records_mean']:,} | {rate} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--bootstrap", default=os.environ.get("BATON_KAFKA_BOOTSTRAP", "127.0.0.1:29092"))
    parser.add_argument("--keys", type=int, default=10_000_000)
    parser.add_argument("--partitions", type=int, default=12)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--workers", type=int, nargs="+", default=[3, 6])
    parser.add_argument("--standbys", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument(
        "--acceptable-recovery-lag",
        type=int,
        default=10_000,
        help="the workers' acceptable.recovery.lag: keep it below one partition's changelog length",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    out = args.json or Path("bench/results") / f"failover-{time.strftime('%Y%m%d-%H%M%S')}.json"
    source = f"bench-failover-clicks-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(source, args.partitions, 1)])[source].result(30)
    t0 = time.monotonic()
    load_clicks(args.bootstrap, source, args.keys)
    print(f"produced {args.keys:,} keys in {time.monotonic() - t0:.1f}s", flush=True)
    settings: list[dict[str, Any]] = []

    def write() -> None:  # after every setting, so a long run cut off keeps what it measured
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(
            orjson.dumps(
                {
                    "keys": args.keys,
                    "partitions": args.partitions,
                    "cpus": os.cpu_count(),
                    "session_timeout_ms": SESSION_MS,
                    "acceptable_recovery_lag": args.acceptable_recovery_lag,
                    "guarantee": "exactly_once_v2",
                    "settings": settings,
                },
                option=orjson.OPT_INDENT_2,
            )
        )

    with tempfile.TemporaryDirectory() as tmp:
        for members in args.workers:
            for standbys in args.standbys:
                if standbys >= members:
                    continue
                settings.append(
                    run_setting(
                        bootstrap=args.bootstrap,
                        source=source,
                        partitions=args.partitions,
                        members=members,
                        standbys=standbys,
                        keys=args.keys,
                        trials=args.trials,
                        workdir=Path(tmp),
                        acceptable_lag=args.acceptable_recovery_lag,
                    )
                )
                write()
    admin.delete_topics([source])
    print()
    print(
        f"{args.keys:,} keys over {args.partitions} partitions, exactly-once, one worker SIGKILLed per trial "
        f"(session timeout {SESSION_MS / 1000:g} s); per moved task: how it started and seconds from the kill "
        "to its first processed record"
    )
    print(_table(settings))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
