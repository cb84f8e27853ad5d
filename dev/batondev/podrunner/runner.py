"""The runner: watch Pods, bind the selected ones to our Node, run a PodWorker per bound Pod.

Which Pods: those in ``--namespace`` (any number; default all) that match ``--selector``.
``--all`` drops the selector and runs every Pod bound to the Node (with ``--scheduler``,
whatever kube-scheduler put there). Binding is the Binding API, as kube-scheduler does it;
the runner binds a Pod only when its ``nodeSelector`` matches the Node's labels. Either way
the runner creates the PVs of a selected Pod's claims before it is bound: kube-scheduler
does not place a Pod whose claims are unbound.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from batondev import debtools, paths
from batondev.paths import REPO
from batondev.podrunner import claims, portmap, process, volumes
from batondev.podrunner.kubeapi import Api
from batondev.podrunner.node import NodeAgent, node_object
from batondev.podrunner.ocirun import OciRuntime
from batondev.podrunner.pod import Context, PodWorker


@dataclass
class Options:
    node: str = "baton-local"
    namespaces: list[str] = field(default_factory=list)
    selector: str | None = None
    scheduler: bool = False  # let kube-scheduler bind instead of binding ourselves
    untainted: bool = False  # no NoSchedule taint: kube-scheduler may place any Pod here
    kubeconfig: str | None = None
    root: Path = paths.RUN / "podrunner"
    workdir: Path = REPO
    bin_dir: Path = Path(sys.executable).parent
    backoff_base: float = 1.0
    backoff_cap: float = 30.0
    shutdown_grace: float = 10.0
    image_env: dict[str, str] = field(default_factory=dict)  # stands in for the image's ENV
    runtime: str = "process"  # or an OCI runtime (runc, crun): containers run from their images


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} podrunner: {message}", flush=True)


def node_selector_matches(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    wanted = pod["spec"].get("nodeSelector") or {}
    return all(labels.get(k) == v for k, v in wanted.items())


def wants_binding(pod: dict[str, Any], labels: dict[str, str]) -> bool:
    """An unbound, live, default-scheduled Pod whose nodeSelector fits this Node."""
    spec, meta = pod["spec"], pod["metadata"]
    return (
        not spec.get("nodeName")
        and not meta.get("deletionTimestamp")
        and (spec.get("schedulerName") or "default-scheduler") == "default-scheduler"
        and not spec.get("schedulingGates")
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
        and node_selector_matches(pod, labels)
    )


def _oci(options: Options) -> OciRuntime | None:
    """The OCI runtime of ``--runtime runc|crun`` (installed from Debian's packages if missing)."""
    if options.runtime == "process":
        return None
    debtools.ensure(options.runtime, "buildah")
    return OciRuntime(state=options.root / ".oci-state" / options.node, binary=options.runtime)


class Runner:
    def __init__(self, options: Options) -> None:
        self.options = options
        self.api = Api(options.kubeconfig)
        self.node = NodeAgent(self.api, options.node, taint=not options.untainted)
        self.labels: dict[str, str] = node_object(options.node, taint=False)["metadata"]["labels"]
        self.ctx = Context(
            api=self.api,
            node=options.node,
            layout=volumes.Layout(options.root),
            ports=portmap.Allocator(),
            bin_dir=options.bin_dir,
            workdir=options.workdir,
            backoff_base=options.backoff_base,
            backoff_cap=options.backoff_cap,
            log=log,
            image_env=options.image_env,
            oci=_oci(options),
        )
        self.workers: dict[str, PodWorker] = {}
        self._lock = threading.Lock()
        self.stop = threading.Event()

    # --- events ------------------------------------------------------------------------
    def on_list(self, namespace: str | None, pods: list[dict[str, Any]]) -> None:
        """A (re)list: handle every Pod, and end workers whose Pod is no longer there."""
        seen = {p["metadata"]["uid"] for p in pods}
        with self._lock:
            lost = [
                w
                for uid, w in self.workers.items()
                if uid not in seen and (namespace is None or w.key.startswith(f"{namespace}/"))
            ]
        for worker in lost:
            self.on_event("DELETED", worker.pod)
        for pod in pods:
            self.on_event("ADDED", pod)

    def on_event(self, kind: str, pod: dict[str, Any]) -> None:
        try:
            self._handle(kind, pod)
        except Exception:
            log(
                f"handling {kind} {pod['metadata'].get('namespace')}/{pod['metadata'].get('name')} failed:\n"
                f"{traceback.format_exc()}"
            )

    def _handle(self, kind: str, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        uid = meta["uid"]
        with self._lock:
            worker = self.workers.get(uid)
        if kind == "DELETED":
            if worker is not None:
                worker.gone()
                with self._lock:
                    self.workers.pop(uid, None)
            return
        if worker is not None:
            worker.update(pod)
            return
        if not spec.get("nodeName"):
            if wants_binding(pod, self.labels):
                for claim in volumes.claim_names(pod):
                    claims.ensure_bound(
                        self.api, self.ctx.layout, meta["namespace"], claim, self.options.node
                    )
                if not self.options.scheduler:
                    self._bind(pod)
            return
        if spec["nodeName"] != self.options.node:
            return
        if meta.get("deletionTimestamp") and not (pod.get("status") or {}).get("containerStatuses"):
            # never started here (or a previous runner's): nothing to stop
            self.api.delete("v1", "Pod", meta["name"], meta["namespace"], grace=0, uid=uid)
            return
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") and not meta.get(
            "deletionTimestamp"
        ):
            return  # finished Pods stay finished
        worker = PodWorker(self.ctx, pod)
        with self._lock:
            self.workers[uid] = worker
        log(f"{worker.key}: running")
        worker.start()

    def _bind(self, pod: dict[str, Any]) -> None:
        meta = pod["metadata"]
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": self.options.node},
        }
        try:
            self.api.create("v1", "Binding", body, namespace=meta["namespace"])
            log(f"{meta['namespace']}/{meta['name']}: bound to {self.options.node}")
        except Exception as exc:  # already bound by someone else, or deleted meanwhile
            log(f"{meta['namespace']}/{meta['name']}: bind failed: {exc}")

    # --- main ----------------------------------------------------------------------------
    def run(self) -> None:
        killed = process.kill_orphans(self.options.node)
        if killed:
            log(f"ended {killed} process(es) left by an earlier runner of {self.options.node}")
        self.node.register()
        scopes: list[str | None] = list(self.options.namespaces) or [None]
        threads = [
            threading.Thread(
                target=self.api.watch_pods,
                args=(
                    ns,
                    self.options.selector,
                    lambda pods, ns=ns: self.on_list(ns, pods),
                    self.on_event,
                    self.stop,
                ),
                name=f"watch-{ns or 'all'}",
                daemon=True,
            )
            for ns in scopes
        ]
        for t in threads:
            t.start()
        log(
            f"node {self.options.node} ready ({self.options.runtime} mode); running pods in {', '.join(self.options.namespaces) or 'all namespaces'}"
            f"{' matching ' + self.options.selector if self.options.selector else ''}; "
            f"{'kube-scheduler binds' if self.options.scheduler else 'binding them myself'}"
        )
        while True:
            try:
                claims.reap_released(self.api, self.ctx.layout)
            except Exception as exc:
                log(f"reaping released volumes failed: {exc}")
            if self.stop.wait(15.0):
                break
        self._shutdown()

    def _shutdown(self) -> None:
        with self._lock:
            workers = list(self.workers.values())
        log(f"stopping {len(workers)} pod(s)")
        for w in workers:
            w.shutdown(self.options.shutdown_grace)
        for w in workers:
            w.join(self.options.shutdown_grace + 5)
        self.node.unregister()
        log("stopped")

    def install_signal_handlers(self) -> None:
        def handler(signum: int, _frame: object) -> None:
            self.stop.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)
