"""Chaos, the long variant of tests/e2e/test_chaos.py: faults and deploys under steady input.

    python bench/chaos.py [--duration 300] [--rate 50] [--fault-interval 10] [--deploys 2]
                          [--rollbacks 1] [--replicas 2] [--standby 1]
                          [--state-migration Reuse,Rebuild] [--json PATH]

On the local stack (``dev/stack up``) and its node: a fresh namespace with the CRDs, the
operator installed with the chart, and the click counter as a StreamApp (exactly-once, write
cache off), all Pods from the runtime image. Clicks arrive at ``--rate`` per second for at least
``--duration`` seconds while, every ``--fault-interval`` seconds, one fault happens (a worker
Pod deleted, a worker container's process SIGKILLed, the operator's SIGKILLed, the kubelet
SIGKILLed and started again), also during deploys; the
deploys (spec changes the operator rolls out blue-green and flips) are spread over the
duration, each of the first ``--rollbacks`` followed by a rollback, and every second one has
the operator SIGKILLed midway. The scenario is ``batondev.chaos``.

It prints every event (kind, target, time), then a table: faults by kind, durations,
records in/out, lost, duplicated, out of order, final Ready; and writes the same as JSON
(default ``bench/results/chaos-<time>.json``, gitignored). Exit code 0 only if the output
is exact and the app is Ready at the end.
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
from batondev.chaos import FAULT_KINDS, Chaos, ChaosConfig, create_topics, delete_topics  # noqa: E402


def _args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=300.0, help="Seconds of input at least")
    p.add_argument("--rate", type=int, default=50, help="Clicks per second")
    p.add_argument("--fault-interval", type=float, default=10.0, help="Seconds between events")
    p.add_argument("--deploys", type=int, default=2)
    p.add_argument("--rollbacks", type=int, default=1, help="Each right after a deploy")
    p.add_argument("--replicas", type=int, default=2)
    p.add_argument("--standby", type=int, default=1)
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--state-migration",
        default="Reuse,Rebuild",
        help="spec.upgrade.stateMigration per deploy, in turn (comma-separated Reuse/Rebuild): "
        "Rebuild gives the deploy's idle color a new, empty application id generation",
    )
    p.add_argument("--json", type=Path, default=None, help="Where to write the JSON report")
    return p.parse_args()


def main() -> int:
    args = _args()
    rollbacks = min(args.rollbacks, args.deploys)
    # Faults fill the duration on their own clock; deploys are spread over it and overlap them.
    faults = max(int(args.duration // args.fault_interval) - 1, len(FAULT_KINDS))
    stack.up_components(["kafka", "kube", "node", "helm"])
    node_image = image.build("runtime")
    node.load_image(node_image)
    cfg = ChaosConfig(
        faults=faults,
        fault_interval_s=args.fault_interval,
        deploys=args.deploys,
        rollbacks=rollbacks,
        rate=args.rate,
        min_input_s=args.duration,
        deploy_every_s=args.duration / (args.deploys + 1),
        replicas=args.replicas,
        standby_replicas=args.standby,
        partitions=args.partitions,
        seed=args.seed,
        state_migrations=tuple(args.state_migration.split(",")),
        ready_timeout_s=600,
        catch_up_timeout_s=600,
        node_image=node_image,
    )
    bootstrap = kafka.node_bootstrap()
    run = uuid.uuid4().hex[:6]
    namespace = f"chaos-bench-{run}"
    clicks, counts = f"chaos-bench-clicks-{run}", f"chaos-bench-counts-{run}"
    kubectl = e2e.Kubectl.local()
    kubectl("create", "namespace", namespace)
    create_topics(bootstrap, [clicks, counts], args.partitions)
    workdir = REPO / "bench" / "results" / f"chaos-{run}"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    out_path = args.json or REPO / "bench" / "results" / f"chaos-{stamp}.json"
    print(f"chaos bench: namespace {namespace}, logs in {workdir}", flush=True)
    try:
        report = Chaos(
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
        with_timeout = ["--wait=false"]
        subprocess.run(
            [
                str(kubectl.binary),
                f"--kubeconfig={kubectl.kubeconfig}",
                "delete",
                "namespace",
                namespace,
                *with_timeout,
            ],
            capture_output=True,
            check=False,
        )
    print("\nEvents\n" + report.events_table())
    print("\nReport\n" + report.summary_table())
    if report.verdict.problems:
        print("\nProblems\n" + "\n".join(report.verdict.problems[:50]))
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps({"namespace": namespace, **report.to_json()}, indent=2, default=str))
    print(f"\nJSON report: {out_path}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())
