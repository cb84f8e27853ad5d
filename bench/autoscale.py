"""Autoscaling on the node (issue 49): a ramp 1,000 -> 9,000 -> 1,000 records/s, warmups against "at once".

    python bench/autoscale.py [--duration 600] [--modes warmups "at once"] [--low 1000]
                              [--high 9000] [--lookup-wait-ms 0.4] [--no-write-cache]
                              [--max-replicas 6] [--standby 0] [--json PATH]

On the local stack (``dev/stack up``) and its node: per mode, a fresh namespace with the CRDs,
the operator installed with the chart (``BATON_AUTOSCALING_INTERVAL_SECONDS`` 5), and
``examples/lookup_counter.py`` as a StreamApp with ``spec.autoscaling`` (1..6 replicas, a lag
target of 3 s of input, ``targetUtilization`` 0.9 so that one replica holds 1,000 records/s
and six the peak, 30 s up and 60 s down windows, in by at most half the Pods per 30 s),
12 input partitions, exactly-once, the write cache on (``--no-write-cache``: off, one count
per click); all Pods from the runtime image. The topology waits ``--lookup-wait-ms`` per record
(a remote call's stand-in), so one replica serves about 1,800 records/s on this machine and
the peak needs all six.

The write cache is on by default because it is the worker's default and because, off, every
click costs a Pod two sends of its own: at these rates librdkafka's producer thread then wakes
for nearly every record, and a Pod spent 130 µs of CPU a click against 60-70 µs with the cache
(0.6 ms wait, one worker, measured here); six Pods, the broker and the control plane then do
not fit in two cores (one Pod served ~880 records/s on the node, six ~3,500-4,000). With the
cache, a key's latest count goes out at each commit (every 100 ms under exactly-once), so
the pauses below have a floor of about 0.1 s and the output check wants each key's counts
strictly increasing, ending at its clicks.

The input holds ``--low`` for the first tenth of ``--duration``, ramps linearly to ``--high``
by 45 %, holds it to 55 %, ramps down to ``--low`` by 90 % and holds it to the end. The modes:

* **warmups** (the default ``acceptableRecoveryLag``): a new Pod warms a task's state up
  before it owns the task;
* **at once** (``spec.acceptableRecoveryLag`` at its int64 maximum: every member counts as
  caught up, as in bench/scaleout.py): tasks move to a new Pod as soon as it joins and
  restore there while their partitions wait.

Every 3 s a sampler reads the active StatefulSet's replicas, ``status.autoscaling`` and the
group's lag; the p99 end-to-end latency per sample (the broker's append time of a count minus
its click's timestamp) and the longest output pause of any sink partition during each
scaling step (gaps between its appends, from 20 s before the step as the baseline) come from
the sink topic afterwards. The scenario is ``batondev.autoscale``.

Prints per mode a table over time (one row per ``--table-every`` seconds), a table of the
scaling steps and a summary, and writes JSON (default ``bench/results/autoscale-<time>.json``,
gitignored) with every sample. Exit code 0 only if the counts are exact in every mode.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "dev"))

from batondev import e2e, image, kafka, node, stack  # noqa: E402
from batondev.autoscale import MODES, Autoscale, AutoscaleConfig, AutoscaleReport, create_topics  # noqa: E402
from batondev.chaos import delete_topics  # noqa: E402


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--duration", type=float, default=600.0, help="Seconds of input")
    p.add_argument("--modes", nargs="+", choices=MODES, default=list(MODES))
    p.add_argument("--low", type=int, default=1000, help="Records/s at the start and the end")
    p.add_argument("--high", type=int, default=9000, help="Records/s at the peak")
    p.add_argument("--lookup-wait-ms", type=float, default=0.4, help="The topology's wait per record")
    p.add_argument(
        "--write-cache",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="spec.worker.writeCache (the worker's default, on): a key's latest count each commit; off: one per click",
    )
    p.add_argument("--partitions", type=int, default=12)
    p.add_argument("--keys", type=int, default=1200)
    p.add_argument("--max-replicas", type=int, default=6)
    p.add_argument("--standby", type=int, default=0, help="spec.standbyReplicas")
    p.add_argument("--lag-seconds", type=float, default=3.0, help="spec.autoscaling.lagSeconds")
    p.add_argument(
        "--target-utilization",
        type=float,
        default=0.9,
        help="spec.autoscaling.targetUtilization (0.9: one replica holds the low rate, six the peak)",
    )
    p.add_argument("--operator-interval", type=float, default=5.0, help="BATON_AUTOSCALING_INTERVAL_SECONDS")
    p.add_argument("--sample-every", type=float, default=3.0)
    p.add_argument("--table-every", type=float, default=30.0, help="Seconds per row of the printed table")
    p.add_argument("--json", type=Path, default=None, help="Where to write the JSON report")
    return p.parse_args()


def profile(duration: float, low: float, high: float) -> tuple[tuple[float, float], ...]:
    """Low, ramp up, hold the peak, ramp down, low: (seconds, records/s) points."""
    d = duration
    return ((0, low), (0.10 * d, low), (0.45 * d, high), (0.55 * d, high), (0.90 * d, low), (d, low))


def run_mode(args: argparse.Namespace, mode: str, node_image: str, stamp: str) -> AutoscaleReport:
    bootstrap = kafka.node_bootstrap()
    run = uuid.uuid4().hex[:6]
    namespace = f"autoscale-bench-{run}"
    clicks, counts = f"autoscale-bench-clicks-{run}", f"autoscale-bench-counts-{run}"
    kubectl = e2e.Kubectl.local()
    kubectl("create", "namespace", namespace)
    create_topics(bootstrap, clicks, counts, args.partitions)
    workdir = REPO / "bench" / "results" / f"autoscale-{stamp}-{mode.replace(' ', '')}"
    print(f"\n== {mode}: namespace {namespace}, logs in {workdir}", flush=True)
    cfg = AutoscaleConfig(
        profile=profile(args.duration, args.low, args.high),
        mode=mode,
        partitions=args.partitions,
        keys=args.keys,
        lookup_wait_ms=args.lookup_wait_ms,
        write_cache=args.write_cache,
        min_replicas=1,
        max_replicas=args.max_replicas,
        standby_replicas=args.standby,
        lag_seconds=args.lag_seconds,
        target_utilization=args.target_utilization,
        scale_up_window_s=30,
        scale_down_window_s=60,
        scale_down_policies=[{"type": "Percent", "value": 50, "periodSeconds": 30}],
        step_timeout_s=180,
        operator_interval_s=args.operator_interval,
        sample_every_s=args.sample_every,
        catch_up_timeout_s=600,
        node_image=node_image,
    )
    try:
        return Autoscale(
            cfg,
            namespace=namespace,
            bootstrap=bootstrap,
            clicks_topic=clicks,
            counts_topic=counts,
            workdir=workdir,
            say=lambda line: print(line, flush=True),
        ).run()
    finally:
        delete_topics(bootstrap, [clicks, counts])
        subprocess.run(
            [
                str(kubectl.binary),
                f"--kubeconfig={kubectl.kubeconfig}",
                "delete",
                "namespace",
                namespace,
                "--wait=false",
            ],
            capture_output=True,
            check=False,
        )


def main() -> int:
    args = _args()
    stack.up_components(["kafka", "kube", "node", "helm"])
    node_image = image.build("runtime")
    node.load_image(node_image)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_path = args.json or REPO / "bench" / "results" / f"autoscale-{stamp}.json"
    reports: list[AutoscaleReport] = []
    for mode in args.modes:
        report = run_mode(args, mode, node_image, stamp)
        reports.append(report)
        print(f"\n{mode}: over time (one row per {args.table_every:g} s; replicas spec/ready)")
        print(report.samples_table(args.table_every))
        print(f"\n{mode}: scaling steps\n{report.steps_table()}\n{report.reasons()}")
        print(f"\n{mode}: summary\n{report.summary_table()}")
        if report.check.problems:
            print("problems:\n" + "\n".join(report.check.problems[:30]))
        out_path.parent.mkdir(parents=True, exist_ok=True)
        out_path.write_text(
            json.dumps(
                {"args": {k: str(v) for k, v in vars(args).items()}, "runs": [r.to_json() for r in reports]},
                indent=2,
                default=str,
            )
        )
    print("\nScaling steps, all modes")
    for r in reports:
        print(r.steps_table())
    print(f"\nJSON report: {out_path}")
    return 0 if all(r.passed for r in reports) else 1


if __name__ == "__main__":
    sys.exit(main())
