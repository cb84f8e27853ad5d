"""Failover with 0, 1 and 2 standbys, 3 and 6 workers: which tasks are promoted, and how fast each resumes.

    python bench/failover.py [--bootstrap 127.0.0.1:29092] [--keys 10000000] [--partitions 12]
                             [--workers 3 6] [--standbys 0 1 2] [--trials 3]
                             [--acceptable-recovery-lag 10000] [--json PATH]
                             [--fault kill|stall] [--max-poll-interval-ms 20000] [--stall-seconds S]

For each worker count and ``num.standby.replicas``: start the click-counter workers
(exactly-once), load the keys (10 M by default: a full restore of one task then replays
~830,000 changelog records, tens of seconds for a member that takes several), then per
trial fault one worker (round robin) and measure, for every task it owned, from the other
workers' log lines:

* **promoted or restored**: whether the new owner resumed from a standby (Baton's
  assignor hands a dead member's task to a caught-up standby holder) or replayed the
  task's changelog from scratch;

* **resume after assignment**: from the group handing a partition to its new owner (the
  assign callback) to the first record that owner processed for it (restore included):
  the ``baton_assignment_to_first_record_seconds`` metric;
* **resume after the fault**, per task: from the fault to that first record (adds failure
  detection);
* **restored records** and **restore throughput** (records a worker restored / seconds
  its restores took).

The fault (``--fault``):

* ``kill`` (the default): SIGKILL the worker. Detection is the ``session.timeout.ms``,
  6 s here. The victim restarts (same instance id and state dir) once its tasks resumed.
* ``stall``: the worker's processing thread stalls in user code (the workers run
  ``bench/topologies/stalling_click_counter.py``: the bench creates the victim's flag file
  and the next record's ``peek`` removes it and sleeps ``--stall-seconds``, the GIL
  released, as a call to a dead service would). The process stays up and its membership
  thread keeps heartbeating; once the processing thread has not been back in its loop for
  ``max.poll.interval.ms`` (``--max-poll-interval-ms``, 20 s by default) the membership
  thread leaves the group (as in Kafka Streams), and since the workers are static
  members the broker lets their tasks go after the session timeout. Resume is measured
  from the stall's start (the time the victim logged that its user code stalls) to each
  task's first record at its new owner; the trial also reports when the victim left the
  group, when its thread came back, and when it rejoined (the first assignment it applied
  after coming back). ``--stall-seconds`` (default: max.poll.interval + session timeout +
  30 s) must outlast the hand-over. All workers run with ``max.poll.interval.ms`` set. The
  interval counts from the thread's last pass through its loop, a batch before the
  stalling record, so "left the group" can read a few ms under it.

A steady trickle of new input (its own users per setting) keeps every partition busy so
"first record" is seen within ~20 ms of the partition being ready. Between trials the
victim is back (restarted, or its thread awake and rejoined) and the bench waits until
every worker is ready, no warmup is left, standbys are caught up and released task folders
are cleaned (``--state-cleanup-delay-ms``), so every trial starts from the same kind of
placement. After the last trial the input stops and the bench checks exactly-once on the
trickle's counts (read_committed): every user's last count is the number of its clicks and
no count repeats or goes back; "counts exact" in the table and ``counts`` in the JSON.

``--acceptable-recovery-lag`` must stay below one partition's changelog length (the
default 10,000 is far below the ~830,000 of 10 M keys). Above it, a survivor with no
copy at all counts as caught up, and when the victim's standbys sit unevenly on the
survivors (3 and 1 of 4), the assignor balances by giving one task to the member without
a copy, which then restores it from scratch: right for such short changelogs, but not the
failover this bench measures. Small runs pass a small lag.

Prints a table and writes JSON (default ``bench/results/failover-<time>.json``, or
``failover-stall-<time>.json``). The current numbers and the commands that made them are in
docs/benchmarks.md (JSON: ``bench/failover.json``, ``bench/failover-stall.json``).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import itertools
import math
import os
import signal
import statistics
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from baton.testing import SteadyInput, WorkerProcess, end_offsets, group_committed, read_all, wait_for
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
STALLING_APP = Path(__file__).resolve().parent / "topologies" / "stalling_click_counter.py"
STALLING = "bench: user code stalls"  # the log lines of STALLING_APP
LEFT = "processing thread stalled past max.poll.interval.ms; leaving the group until it is back"
BACK = "processing thread back; joining the group again"  # both from baton/worker/assignment/membership.py


def _wall(line: dict[str, object]) -> float:
    ts = str(line["ts"])
    return datetime.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=datetime.UTC).timestamp()


def _since(worker: WorkerProcess, seen: int, msg: str) -> dict[str, object] | None:
    """The first log line ``msg`` after the first ``seen`` lines of the worker's current run."""
    return next((x for x in worker.logs()[seen:] if x.get("msg") == msg), None)


def _percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (with 5 trials, p99 is the worst trial)."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass(frozen=True)
class Fault:
    """What a trial does to its victim: SIGKILL it, or stall its user code past max.poll.interval.ms."""

    kind: str  # "kill" or "stall"
    max_poll_interval_ms: int = 300_000
    stall_seconds: float = 0.0

    @property
    def resume_key(self) -> str:
        """The JSON key of a task's seconds from the fault to its first record at the new owner."""
        return f"resume_after_{self.kind}_s"


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
        fault: Fault,
    ) -> None:
        self.bootstrap, self.source, self.standbys = bootstrap, source, standbys
        self.partitions, self.members, self.fault = partitions, members, fault
        tag = "-stall" if fault.kind == "stall" else ""
        self.app = f"bench-failover{tag}-w{members}-sb{standbys}-{uuid.uuid4().hex[:6]}"
        self.sink = f"{self.app}-counts"
        admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future resolves
        admin.create_topics([NewTopic(self.sink, partitions, 1)])[self.sink].result(30)
        self.state = {f"w{i}": workdir / self.app / f"s{i}" for i in range(members)}
        self.flags = {name: workdir / f"{self.app}-{name}.stall" for name in self.state}  # --fault stall
        topology, stall_args = CLICK_COUNTER, []
        if fault.kind == "stall":
            topology = STALLING_APP
            stall_args = ["-X", f"consumer.max.poll.interval.ms={fault.max_poll_interval_ms}"]
        self.workers = {
            name: WorkerProcess(
                topology,
                bootstrap=bootstrap,
                application_id=self.app,
                state_dir=self.state[name],
                log_path=workdir / f"{self.app}-{name}.log",
                instance_id=name,
                env={
                    "CLICKS_TOPIC": source,
                    "COUNTS_TOPIC": self.sink,
                    "STALL_FLAG": str(self.flags[name]),
                    "STALL_SECONDS": str(fault.stall_seconds),
                },
                extra_args=[
                    *stall_args,
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
                lag = labelled_metric(w, "baton_standby_lag_records")
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
        seen = {n: len(w.logs()) for n, w in self.workers.items()}
        if self.fault.kind == "kill":
            fault_at = time.time()
            self.workers[victim].kill(signal.SIGKILL)
            self.workers[victim].wait(30)
        else:
            self.flags[victim].touch()  # the victim's next record stalls in its peek
            stalled = wait_for(
                f"{victim}'s user code never stalled",
                lambda: _since(self.workers[victim], seen[victim], STALLING),
                30,
                every=0.1,
            )
            fault_at = _wall(stalled)
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
        back: dict[str, float] = {}
        if self.fault.kind == "kill":
            self.workers[victim].start()
        else:
            back = self._stall_over(victim, seen[victim], fault_at)
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
                self.fault.resume_key: round(_wall(first[p]) - fault_at, 3),
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
            self.fault.resume_key: max(float(str(p[self.fault.resume_key])) for p in partitions),
            **back,
            "restored_records": sum(restored_by.values()),
            "restore_records_per_s": round(sum(rates)) if rates else None,
        }

    def _stall_over(self, victim: str, seen: int, stalled_at: float) -> dict[str, float]:
        """Wait until the stalled victim is back in the group; seconds from the stall to each step."""
        worker = self.workers[victim]
        steps: dict[str, dict[str, object]] = {}

        def rejoined() -> bool:
            lines = worker.logs()[seen:]
            for name, msg in (("left_group_s", LEFT), ("thread_back_s", BACK)):
                if name not in steps and (line := next((x for x in lines if x.get("msg") == msg), None)):
                    steps[name] = line
            if "thread_back_s" in steps:  # the first assignment its thread applied after coming back
                after = lines[lines.index(steps["thread_back_s"]) :]
                if line := next((x for x in after if x.get("msg") == "assignment received"), None):
                    steps["rejoined_s"] = line
            return "rejoined_s" in steps

        wait_for(
            f"{victim} never rejoined after its stall",
            rejoined,
            self.fault.stall_seconds + 120,
            every=0.5,
            detail=lambda: f"seen: {sorted(steps)}",
        )
        if "left_group_s" not in steps:
            raise RuntimeError(f"{victim} rejoined but never logged that it left the group: {LEFT!r}")
        return {name: round(_wall(line) - stalled_at, 3) for name, line in steps.items()}


def _spread(values: list[float]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": _percentile(values, 50) if values else None,
        "p99": _percentile(values, 99) if values else None,
        "min": min(values) if values else None,
        "max": max(values) if values else None,
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
    fault: Fault,
) -> dict[str, Any]:
    cluster = Cluster(bootstrap, source, partitions, members, standbys, workdir, acceptable_lag, fault)
    cluster.start()
    label = f"{members} workers, standby {standbys}"
    key = fault.resume_key
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
        sink_start = end_offsets(bootstrap, cluster.sink)  # the trickle's counts come after these
        users = [f"live{i}-{cluster.app[-6:]}" for i in range(256)]  # this setting's own: counts from 0
        with SteadyInput(bootstrap, source, rate=400, users=users) as feed:
            for n in range(trials):
                victims = [name for name in sorted(owned) if owned[name]]
                result = cluster.trial(victims[n % len(victims)], owned)
                results.append(result)
                parts = ", ".join(f"{p['partition']}:{p['start']}:{p[key]}s" for p in result["partitions"])
                did = "killed" if fault.kind == "kill" else "stalled"
                print(
                    f"  trial {n + 1}: {did} {result['victim']}; per task (how it started: seconds from the "
                    f"{fault.kind} to its first record) {parts}; restored {result['restored_records']:,} records"
                    + (
                        f"; left the group {result['left_group_s']}s, thread back {result['thread_back_s']}s, "
                        f"rejoined {result['rejoined_s']}s after the stall"
                        if fault.kind == "stall"
                        else ""
                    ),
                    flush=True,
                )
                if n < trials - 1:  # the next trial starts from a settled group
                    owned = cluster.settled()
        counts = check_counts(bootstrap, cluster.sink, sink_start, dict(feed.sent))
        print(
            f"  counts: {'exact' if counts['exact'] else 'NOT EXACT'} for {counts['users']} users, "
            f"{counts['clicks']:,} clicks"
            + ("" if counts["exact"] else f": {counts['wrong_last']} {counts['repeated_or_backwards']}"),
            flush=True,
        )
    finally:
        cluster.stop()
    moved = [p for r in results for p in r["partitions"]]
    rates = [r["restore_records_per_s"] for r in results if r["restore_records_per_s"]]
    out = {
        "workers": members,
        "num_standby_replicas": standbys,
        "trials": results,
        "tasks_moved": len(moved),
        "promoted": sum(r["promoted"] for r in results),
        "resumed": sum(r["resumed"] for r in results),
        "full_restores": sum(r["full_restores"] for r in results),
        key: _spread([float(p[key]) for p in moved]),
        f"resume_after_{fault.kind}_promoted_s": _spread(
            [float(p[key]) for p in moved if p["start"] == "promoted"]
        ),
        f"resume_after_{fault.kind}_restored_s": _spread(
            [float(p[key]) for p in moved if p["start"] != "promoted"]
        ),
        "resume_after_assignment_s": _spread([float(p["resume_after_assignment_s"]) for p in moved]),
        "restored_records_mean": round(statistics.mean(r["restored_records"] for r in results)),
        "restore_records_per_s": round(statistics.median(rates)) if rates else None,
        "counts": counts,
    }
    if fault.kind == "stall":
        for step in ("left_group_s", "thread_back_s", "rejoined_s"):
            out[step] = _spread([float(r[step]) for r in results])
    return out


def check_counts(bootstrap: str, sink: str, start: dict[int, int], sent: dict[str, int]) -> dict[str, Any]:
    """Exactly-once on the trickle's counts (read_committed, from ``start``): each user's last count
    is the number of its clicks sent, and no count repeats or goes back."""
    sequences: dict[str, list[int]] = {}

    def last_counts_right() -> bool:
        sequences.clear()
        for r in read_all(bootstrap, sink, start=start):
            if r.key is not None and r.value is not None and (user := r.key.decode()) in sent:
                sequences.setdefault(user, []).append(int(r.value))
        return {u: seq[-1] for u, seq in sequences.items()} == sent

    with contextlib.suppress(TimeoutError):  # reported below, user by user
        wait_for("the trickle's counts never became exact", last_counts_right, 180, every=2)
    wrong = {u: [n, sequences[u][-1] if sequences.get(u) else None] for u, n in sent.items()}
    wrong = {u: v for u, v in wrong.items() if v[0] != v[1]}
    repeated = {}  # user: the counts around the first that repeats or goes back
    for user, seq in sorted(sequences.items()):
        at = next((i for i, (a, b) in enumerate(itertools.pairwise(seq)) if a >= b), None)
        if at is not None:
            repeated[user] = seq[max(0, at - 3) : at + 5]
    return {
        "users": len(sent),
        "clicks": sum(sent.values()),
        "exact": not wrong and not repeated,
        "wrong_last": dict(sorted(wrong.items())[:10]),  # user: [sent, last count]
        "repeated_or_backwards": dict(list(repeated.items())[:10]),
    }


def _table(settings: list[dict[str, Any]], fault: str) -> str:
    def cell(x: dict[str, Any]) -> str:
        if not x["n"]:
            return "-"
        if fault == "kill":
            return f"{x['p50']:.2f} / {x['p99']:.2f}"
        return f"{x['p50']:.2f} [{x['min']:.2f}, {x['max']:.2f}]"

    spread = "p50 / p99" if fault == "kill" else "p50 [min, max]"
    stall_heads = "| stall to leaving the group, s | stall to rejoined, s " if fault == "stall" else ""
    lines = [
        "| workers | standbys | tasks moved | promoted | resumed (leftover copy) | full restores "
        f"| {fault} to first record, s, {spread}: all | promoted | restored {stall_heads}"
        "| restored records / trial | restore rec/s | counts exact |",
        "|---:" * (13 if fault == "stall" else 11) + "|---|",
    ]
    for s in settings:
        rate = f"{s['restore_records_per_s']:,}" if s["restore_records_per_s"] else "-"
        stall_cells = f"| {cell(s['left_group_s'])} | {cell(s['rejoined_s'])} " if fault == "stall" else ""
        lines.append(
            f"| {s['workers']} | {s['num_standby_replicas']} | {s['tasks_moved']} | {s['promoted']} | {s['resumed']} "
            f"| {s['full_restores']} | {cell(s[f'resume_after_{fault}_s'])} "
            f"| {cell(s[f'resume_after_{fault}_promoted_s'])} | {cell(s[f'resume_after_{fault}_restored_s'])} "
            f"{stall_cells}| {s['restored_records_mean']:,} | {rate} "
            f"| {'yes' if s['counts']['exact'] else 'NO'} ({s['counts']['clicks']:,} clicks) |"
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
    parser.add_argument(
        "--fault",
        choices=["kill", "stall"],
        default="kill",
        help="kill: SIGKILL the victim; stall: its user code stalls past max.poll.interval.ms",
    )
    parser.add_argument(
        "--max-poll-interval-ms",
        type=int,
        default=20_000,
        help="--fault stall: the workers' consumer.max.poll.interval.ms",
    )
    parser.add_argument(
        "--stall-seconds",
        type=float,
        default=None,
        help="--fault stall: how long the user code sleeps (default: max.poll.interval + session timeout + 30 s)",
    )
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    fault = Fault(args.fault)
    if args.fault == "stall":
        handover = (args.max_poll_interval_ms + SESSION_MS) / 1000
        stall_seconds = args.stall_seconds if args.stall_seconds is not None else handover + 30
        if stall_seconds < handover + 5:
            parser.error(
                f"--stall-seconds must outlast max.poll.interval + session timeout + 5 s ({handover + 5:g})"
            )
        fault = Fault("stall", args.max_poll_interval_ms, stall_seconds)
    name = "failover" if args.fault == "kill" else "failover-stall"
    out = args.json or Path("bench/results") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
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
                    "fault": fault.kind,
                    **(
                        {
                            "max_poll_interval_ms": fault.max_poll_interval_ms,
                            "stall_seconds": fault.stall_seconds,
                        }
                        if fault.kind == "stall"
                        else {}
                    ),
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
                        fault=fault,
                    )
                )
                write()
    admin.delete_topics([source])
    print()
    if fault.kind == "kill":
        what = f"one worker SIGKILLed per trial (session timeout {SESSION_MS / 1000:g} s)"
    else:
        what = (
            f"one worker's user code stalled {fault.stall_seconds:g} s per trial (max.poll.interval.ms "
            f"{fault.max_poll_interval_ms}, static members, session timeout {SESSION_MS / 1000:g} s)"
        )
    print(
        f"{args.keys:,} keys over {args.partitions} partitions, exactly-once, {what}; per moved task: how it "
        f"started and seconds from the {fault.kind} to its first processed record at its new owner"
    )
    print(_table(settings, fault.kind))
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
