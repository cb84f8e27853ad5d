"""The operator at fleet scale: API requests at rest, memory and spec-change latency vs. app count.

    python bench/operator_scale.py [--sizes 10 100 500] [--compare-sizes 10 100]
                                   [--window 60] [--changes 5] [--json bench/operator_scale.json]

Needs the local stack (`dev/stack up kube`). For each size, in a fresh namespace, one
`baton operator --no-kafka --standalone` watches that many StreamApps (the click counter,
1 replica per color). kube-controller-manager creates their StatefulSets' Pods and claims
(no node runs them: they stay Pending, which is all the operator needs to see).

* **requests/s at rest**: once every app has been reconciled, its Pods reported Ready (the
  bench plays kubelet) and every app is Stable, and one whole deploy-loop period (30 s) has
  passed, the API server's own audit log (`dev/stack` turns it on) is
  counted over ``--window`` seconds, grouped by user agent: the operator's Kubernetes client
  (`baton-operator/<version>`) and kopf's watches (`kopf/<version>`). Watches are one
  long-lived request each; what grows with the app count is polling.
* **memory**: the operator's resident set size at the end of the window.
* **spec change -> StatefulSet**: ``--changes`` times, one app's spec changes (an env var of
  its pod template: a blue-green deploy to the idle color) and a watch on the StatefulSets
  times the moment the idle color's StatefulSet carries the new spec hash.

``--compare-sizes`` runs the same with ``--no-watch-cache`` (every read a request, as the
operator did before its watch cache), side by side. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config, watch

from baton.testing import wait_for

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "dev"))

from batondev import audit, kube  # noqa: E402
from batondev.e2e import Kubectl, install_crds  # noqa: E402
from batondev.paths import EXAMPLE  # noqa: E402

SPEC_HASH = "baton.dev/spec-hash"


def app_manifest(namespace: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"] = {"name": name, "namespace": namespace}
    body["spec"].update(replicas=1, standbyReplicas=0)
    return body


class OperatorRun:
    """One operator process for one namespace, with its log."""

    def __init__(self, namespace: str, log: Path, cache: bool) -> None:
        args = [str(Path(sys.executable).parent / "baton"), "operator", "-n", namespace]
        args += ["--no-kafka", "--standalone"] + ([] if cache else ["--no-watch-cache"])
        env = {**os.environ, "KUBECONFIG": str(kube.kubeconfig()), "PYTHONUNBUFFERED": "1"}
        log.parent.mkdir(parents=True, exist_ok=True)
        self.log = log
        with log.open("wb") as out:
            self.proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        wait_for(
            "the operator to start",
            lambda: "Initial authentication has finished" in log.read_text(errors="replace"),
            120,
        )

    def rss_mib(self) -> float:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
        return float("nan")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def audit_requests(since: float, until: float, namespace: str) -> dict[str, Any]:
    """The operator's requests the API server logged in [since, until), by user agent and verb."""
    by_agent: dict[str, int] = {}
    by_verb: dict[str, int] = {}
    for r in audit.requests(since, until):
        # the namespace's objects, and cluster-scoped reads kopf makes for it
        if r.agent not in ("baton-operator", "kopf") or r.namespace not in (namespace, ""):
            continue
        by_agent[r.agent] = by_agent.get(r.agent, 0) + 1
        verb = f"{r.agent} {r.verb} {r.resource}"
        by_verb[verb] = by_verb.get(verb, 0) + 1
    seconds = until - since
    return {
        "seconds": round(seconds, 1),
        "per_second": {k: round(v / seconds, 2) for k, v in sorted(by_agent.items())},
        "total_per_second": round(sum(by_agent.values()) / seconds, 2),
        "by_verb": dict(sorted(by_verb.items(), key=lambda kv: -kv[1])),
    }


def mark_pods_ready(namespace: str, expect: int) -> None:
    """Play kubelet for the apps' Pods (no node runs them): Running and Ready, so every app
    reaches Stable and its deploy loop looks every 30 s, as in a healthy fleet."""
    core = client.CoreV1Api()

    def pods() -> list[str] | None:
        items = core.list_namespaced_pod(
            namespace, label_selector="app.kubernetes.io/managed-by=baton-operator"
        ).items
        return [str(p.metadata.name) for p in items if p.metadata] if len(items) >= expect else None

    names = wait_for(f"{expect} Pods", pods, 900, every=2)
    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    ready = {
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": t, "status": "True", "lastTransitionTime": now}
                for t in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
            ],
        }
    }
    for name in names:
        core.patch_namespaced_pod_status(name, namespace, ready)


def stable(kubectl: Kubectl, namespace: str, count: int) -> bool:
    items = (kubectl.get("sapp", "-n", namespace) or {}).get("items", [])
    return sum(1 for a in items if (a.get("status") or {}).get("phase") == "Stable") >= count


def reconciled(kubectl: Kubectl, namespace: str, count: int) -> bool:
    items = (kubectl.get("sapp", "-n", namespace) or {}).get("items", [])
    done = [
        a
        for a in items
        if (a.get("status") or {}).get("observedGeneration") == a["metadata"].get("generation")
        and (a.get("status") or {}).get("colors", {}).get("green", {}).get("specHash")
    ]
    return len(done) >= count


def spec_change_latency(kubectl: Kubectl, namespace: str, app: str, n: int) -> float:
    """Seconds from changing ``app``'s spec to its idle (green) StatefulSet carrying it."""
    apps = client.AppsV1Api()
    name = f"{app}-green"
    before = (kubectl.get("statefulset", name, "-n", namespace) or {})["metadata"]["annotations"][SPEC_HASH]
    seen: dict[str, float] = {}
    w = watch.Watch()  # type: ignore[no-untyped-call]

    def follow() -> None:
        for event in w.stream(  # type: ignore[no-untyped-call]
            apps.list_namespaced_stateful_set,
            namespace,
            field_selector=f"metadata.name={name}",
            timeout_seconds=120,
        ):
            current = (event["object"].metadata.annotations or {}).get(SPEC_HASH)
            if current and current != before:
                seen["at"] = time.monotonic()
                w.stop()  # type: ignore[no-untyped-call]
                return

    follower = threading.Thread(target=follow, daemon=True)
    follower.start()
    time.sleep(0.5)  # the watch is open
    patch = {"spec": {"podTemplate": {"env": [{"name": "BENCH_CHANGE", "value": str(n)}]}}}
    started = time.monotonic()
    kubectl("patch", "sapp", app, "-n", namespace, "--type=merge", "-p", json.dumps(patch))
    follower.join(120)
    if "at" not in seen:
        raise RuntimeError(f"{name} did not get the new spec within 120 s")
    return seen["at"] - started


def run_size(  # noqa: PLR0917 (one value per dimension of the bench)
    kubectl: Kubectl, size: int, cache: bool, window: float, changes: int, work: Path
) -> dict[str, Any]:
    namespace = f"scale-{'cache' if cache else 'poll'}-{size}-{uuid.uuid4().hex[:5]}"
    kubectl("create", "namespace", namespace)
    op = OperatorRun(namespace, work / f"{namespace}.log", cache)
    try:
        started = time.monotonic()
        names = [f"app-{i:04d}" for i in range(size)]
        for chunk in range(0, size, 50):
            items = [app_manifest(namespace, n) for n in names[chunk : chunk + 50]]
            kubectl.apply({"apiVersion": "v1", "kind": "List", "items": items})
        wait_for(f"{size} apps reconciled", lambda: reconciled(kubectl, namespace, size), 1800, every=2)
        converge = time.monotonic() - started
        mark_pods_ready(namespace, 2 * size)
        wait_for(f"{size} apps Stable", lambda: stable(kubectl, namespace, size), 900, every=2)
        time.sleep(35)  # one whole deploy-loop period: every app's periodic pass has run
        since = time.time()
        time.sleep(window)
        until = time.time()
        time.sleep(2)  # the audit log is written as requests finish
        requests = audit_requests(since, until, namespace)
        memory = op.rss_mib()
        latencies = [
            spec_change_latency(kubectl, namespace, names[(i * 7) % size], i) for i in range(changes)
        ]
    finally:
        # the apps go while the operator runs: kopf's finalizers need it
        kubectl("delete", "sapp", "--all", "-n", namespace, "--timeout=900s", check=False, timeout=960)
        op.stop()
        # no kubelet confirms a graceful Pod deletion here: without --force the namespace
        # would stay Terminating for ever
        kubectl(
            "delete",
            "pods",
            "--all",
            "-n",
            namespace,
            "--force",
            "--grace-period=0",
            check=False,
            timeout=600,
        )
        kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    return {
        "apps": size,
        "watch_cache": cache,
        "converge_seconds": round(converge, 1),
        "requests": requests,
        "rss_mib": memory,
        "spec_change_seconds": {
            "median": round(statistics.median(latencies), 3),
            "max": round(max(latencies), 3),
            "all": [round(x, 3) for x in latencies],
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--compare-sizes", type=int, nargs="*", default=[10, 100])
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--changes", type=int, default=5)
    parser.add_argument("--json", type=Path, default=Path(__file__).with_name("operator_scale.json"))
    parser.add_argument("--work", type=Path, default=Path("/tmp/baton-bench-operator-scale"))
    args = parser.parse_args()
    if not kube.audit_log().exists():
        sys.exit(
            "the API server's audit log is missing: restart the stack (dev/stack down; dev/stack up kube)"
        )
    config.load_kube_config(str(kube.kubeconfig()))  # type: ignore[no-untyped-call]
    kubectl = Kubectl.local()
    install_crds(kubectl)
    runs = [(size, True) for size in args.sizes] + [(size, False) for size in args.compare_sizes]
    results = []
    for size, cache in runs:
        print(f"{size} apps, {'watch cache' if cache else 'no cache (polling)'} ...", flush=True)
        results.append(run_size(kubectl, size, cache, args.window, args.changes, args.work))
        with contextlib.suppress(OSError):
            args.json.write_text(json.dumps({"runs": results}, indent=2) + "\n")
    print()
    header = (
        "apps",
        "reads",
        "converge s",
        "baton-operator req/s",
        "kopf req/s",
        "RSS MiB",
        "spec->STS median s",
        "max s",
    )
    print(" | ".join(header))
    print(" | ".join("---" for _ in header))
    for r in results:
        per = r["requests"]["per_second"]
        print(
            " | ".join(
                str(x)
                for x in (
                    r["apps"],
                    "watch cache" if r["watch_cache"] else "GET/LIST per pass",
                    r["converge_seconds"],
                    per.get("baton-operator", 0.0),
                    per.get("kopf", 0.0),
                    r["rss_mib"],
                    r["spec_change_seconds"]["median"],
                    r["spec_change_seconds"]["max"],
                )
            )
        )
    print(f"\nwrote {args.json}")


if __name__ == "__main__":
    main()
