"""End-to-end building blocks on the local stack (dev and test tooling, not product).

The chaos test, ``bench/chaos.py`` and the demo all need the same pieces: the real
``kubectl``, the CRDs, the operator as a Pod on the stack's node whose container can be
SIGKILLed, the click counter as a StreamApp pointed at the local broker, the worker Pods on
the node (with their containers' host process ids, through the CRI), and a record-by-record
check of the ``read_committed`` output. Nothing here fakes Kafka or the Kubernetes API: every call goes
to the real broker, API server and processes.
"""

from __future__ import annotations

import collections
import contextlib
import hashlib
import json
import re
import signal
import subprocess
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import orjson

from baton.testing import wait_for
from batondev import gobuild, kube
from batondev.paths import CRD, EXAMPLE, REPO

APP_LABEL = "baton.dev/app"
COLOR_LABEL = "baton.dev/color"

T = TypeVar("T")


@dataclass(frozen=True)
class Kubectl:
    """The stack's real kubectl with its admin kubeconfig."""

    binary: Path
    kubeconfig: Path

    @classmethod
    def local(cls) -> Kubectl:
        return cls(gobuild.kube_dir() / "bin" / "kubectl", kube.kubeconfig())

    def __call__(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(self.binary), f"--kubeconfig={self.kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and out.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
        return out

    def get(self, *args: str) -> Any:
        """``kubectl get ARGS -o json`` parsed, or None when the object does not exist."""
        out = self("get", *args, "-o", "json", check=False)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def apply(self, body: dict[str, Any]) -> None:
        self("apply", "-f", "-", input=json.dumps(body))


def wait_established(
    kubectl: Callable[..., subprocess.CompletedProcess[str]], crd: str, timeout: float = 60
) -> None:
    """Until the CRD's Established condition is True.

    Not ``kubectl wait --for=condition=Established``: on a CRD the API server has not given a
    status yet, kubectl 1.35 fails at once (".status.conditions accessor error: <nil>")
    instead of waiting, which a CI run on a busy node hit.
    """
    query = '{.status.conditions[?(@.type=="Established")].status}'

    def established() -> bool:
        out = kubectl("get", f"crd/{crd}", "-o", f"jsonpath={query}", check=False)
        return out.returncode == 0 and out.stdout.strip() == "True"

    wait_for(f"the CRD {crd} to be established", established, timeout, every=0.5)


def install_crds(kubectl: Kubectl) -> None:
    """The StreamApp CRD (idempotent), once it is served."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(CRD))
    wait_established(kubectl, "streamapps.baton.dev")
    # Established is not enough: the API server answers 429 "storage is (re)initializing"
    # until the watch cache of a new CRD has loaded, which on a busy node takes a while.
    wait_for(
        "the StreamApp API to answer a list",
        lambda: kubectl("get", "streamapps.baton.dev", "-A", "-o", "name", check=False).returncode == 0,
        120,
    )


def lease_args(duration: int) -> list[str]:
    """A short Lease for tests: a killed operator is replaced after ``duration`` seconds."""
    renew = max(2, duration * 2 // 3)
    return ["--lease-duration", str(duration), "--renew-deadline", str(renew), "--retry-period", "1"]


def click_counter_app(
    *,
    name: str,
    namespace: str,
    bootstrap: str,
    clicks_topic: str,
    counts_topic: str,
    application_id: str,
    replicas: int = 2,
    standby_replicas: int = 1,
    write_cache: bool = False,
    env: dict[str, str] | None = None,
    state_migration: str = "Reuse",
) -> dict[str, Any]:
    """examples/click-counter.yaml pointed at the local broker and sized for a laptop.

    The write cache is off by default so every input record yields one output record and
    the output can be checked record by record (see :func:`verdict`). The topology is the
    module path ``examples.click_counter:topology``, which the runtime image carries.
    """
    import yaml

    body: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    body["metadata"] = {"name": name, "namespace": namespace}
    spec = body["spec"]
    spec["kafka"]["bootstrapServers"] = bootstrap
    spec["applicationId"] = application_id
    spec["replicas"] = replicas
    spec["standbyReplicas"] = standby_replicas
    spec["resources"] = {}
    spec["state"] = {"store": "rocksdb", "size": "256Mi"}
    # A short grace: a deleted Pod's worker commits and leaves at once on SIGTERM anyway.
    spec["worker"] = {"writeCache": write_cache, "shutdownGraceSeconds": 10}
    spec["upgrade"] = {
        **spec.get("upgrade", {}),
        "promotionStableSeconds": 5,
        "standbyUpgradeDelaySeconds": 30,
        "stateMigration": state_migration,
    }
    spec["deletionPolicy"] = "DeleteTopics"  # the app's internal topics go with it
    spec["podTemplate"] = {
        **spec.get("podTemplate", {}),
        "env": [
            {"name": "CLICKS_TOPIC", "value": clicks_topic},
            {"name": "COUNTS_TOPIC", "value": counts_topic},
            *({"name": k, "value": v} for k, v in (env or {}).items()),
        ],
    }
    return body


def set_env(body: dict[str, Any], name: str, value: str) -> None:
    """Set one podTemplate env variable of a StreamApp body (a spec change: a deploy)."""
    env: list[dict[str, Any]] = body["spec"]["podTemplate"]["env"]
    for item in env:
        if item["name"] == name:
            item["value"] = value
            return
    env.append({"name": name, "value": value})


def app_object(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Any]:
    body: dict[str, Any] | None = kubectl.get("sapp", name, "-n", namespace)
    if body is None:
        raise RuntimeError(f"StreamApp {namespace}/{name} not found")
    return body


def condition(body: dict[str, Any], kind: str) -> dict[str, Any]:
    for cond in (body.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind:
            return dict(cond)
    return {}


def is_ready(body: dict[str, Any]) -> bool:
    """Ready=True for the current generation (a Ready left over from the last spec does not count)."""
    cond = condition(body, "Ready")
    return cond.get("status") == "True" and cond.get("observedGeneration") == body["metadata"].get(
        "generation"
    )


def wait_app_ready(kubectl: Kubectl, namespace: str, name: str, timeout: float) -> dict[str, Any]:
    """The StreamApp once it is Ready at its current generation (what a deploy pipeline waits for)."""
    try:
        return wait_for(
            f"StreamApp {name} Ready",
            lambda: b if is_ready(b := app_object(kubectl, namespace, name)) else None,
            timeout,
            every=1.0,
        )
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}; {describe_app(kubectl, namespace, name)}") from None


def describe_app(kubectl: Kubectl, namespace: str, name: str) -> str:
    """One line on why an app is not Ready: its conditions and its Pods' phases and restarts."""
    body = kubectl.get("streamapp", name, "-n", namespace)
    if body is None:
        return f"StreamApp {name} does not exist"
    conds = [
        f"{c.get('type')}={c.get('status')} ({c.get('reason', '')}: {c.get('message', '')})"
        for c in (body.get("status") or {}).get("conditions") or []
    ]
    pods = [
        f"{p['metadata']['name']}={(p.get('status') or {}).get('phase', '?')}/restarts {restarts([p])}"
        for p in worker_pods(kubectl, namespace, name)
    ]
    return (
        f"generation {body['metadata'].get('generation')}, conditions [{'; '.join(conds) or 'none'}], "
        f"pods [{', '.join(pods) or 'none'}]"
    )


class PodOperator:
    """The chart's operator as a Pod on the stack's node: ``helm install`` into one namespace.

    A restart kills its Pod at once; the Deployment keeps one replica, so the new Pod takes
    over the Lease as a second replica would."""

    READY_LINE = "Initial authentication has finished"  # kopf has talked to the API server

    def __init__(
        self,
        namespace: str,
        image: str,
        log: Path,
        lease_duration: int = 6,
        env: dict[str, str] | None = None,
    ) -> None:
        from batondev import node

        self.namespace, self.image, self.log, self.lease_duration = namespace, image, log, lease_duration
        # the chart's operator.extraEnv, e.g. BATON_AUTOSCALING_INTERVAL_SECONDS for a short test
        self.env = dict(env or {})
        # ClusterRoles carry the release's name: one release name per namespace
        self.release = f"baton-{hashlib.sha1(namespace.encode()).hexdigest()[:8]}"
        self.toleration = node.TOLERATION
        self.kubectl = Kubectl.local()
        self.starts = 0

    def _helm(self, *args: str) -> None:
        out = subprocess.run(
            [str(gobuild.helm_dir() / "bin" / "helm"), f"--kubeconfig={kube.kubeconfig()}", *args],
            capture_output=True,
            text=True,
            timeout=300,
        )
        if out.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args[:2])} failed: {out.stderr.strip()}")

    def start(self, timeout: float = 180) -> PodOperator:
        repository, _, tag = self.image.rpartition(":")
        renew = max(2, self.lease_duration * 2 // 3)
        self._helm(
            *("upgrade", "--install", self.release, str(REPO / "charts" / "baton"), "-n", self.namespace),
            *("--set", "operator.replicas=1", "--set", f"operator.watchNamespaces={{{self.namespace}}}"),
            *("--set", f"image.repository={repository}", "--set", f"image.tag={tag}"),
            *("--set-json", f"operator.tolerations={json.dumps([self.toleration])}"),
            *("--set", f"operator.leaderElection.leaseDurationSeconds={self.lease_duration}"),
            *("--set", f"operator.leaderElection.renewDeadlineSeconds={renew}"),
            *("--set", "operator.leaderElection.retryPeriodSeconds=1"),
            *(
                (
                    "--set-json",
                    f"operator.extraEnv={json.dumps([{'name': k, 'value': v} for k, v in self.env.items()])}",
                )
                if self.env
                else ()
            ),
        )
        self.kubectl(
            "rollout", "status", f"deploy/{self.release}", "-n", self.namespace, f"--timeout={int(timeout)}s"
        )
        self._wait_ready(timeout)
        self.starts += 1
        return self

    def _pod(self) -> dict[str, Any] | None:
        pods = self.kubectl.get(
            "pods", "-n", self.namespace, "-l", f"app.kubernetes.io/instance={self.release}"
        )
        live = [p for p in (pods or {}).get("items") or [] if not p["metadata"].get("deletionTimestamp")]
        return live[0] if live else None

    def _wait_ready(self, timeout: float) -> None:
        def ready() -> bool:
            pod = self._pod()
            return pod is not None and pod_pid(pod) is not None and self.READY_LINE in self.current_log()

        wait_for("the operator Pod to start", ready, timeout)

    @property
    def pid(self) -> int | None:
        pod = self._pod()
        return pod_pid(pod) if pod else None

    def current_log(self) -> str:
        pod = self._pod()
        if pod is None:
            return ""
        out = self.kubectl("logs", pod["metadata"]["name"], "-n", self.namespace, check=False)
        return out.stdout

    def kill(self, sig: int = signal.SIGKILL, timeout: float = 60) -> None:
        """The end of the run: the release goes (SIGTERM to the Pod, as a drain does)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(Exception):
            self.log.write_text(self.tail(100_000))
        with contextlib.suppress(RuntimeError):
            self._helm(
                "uninstall", self.release, "-n", self.namespace, "--wait", f"--timeout={int(timeout)}s"
            )

    def restart(self) -> None:
        """Kill the operator's Pod at once (``--grace-period=0 --force``: its process gets SIGKILL,
        as when its node dies); the Deployment's new Pod takes over the Lease.

        A Pod, not its container: the kubelet restarts a container that was killed before with
        a growing back-off (10 s, 20 s, 40 s, ...), which a real operator dying once a week never
        sees and which would stretch every later fault here."""
        pod = self._pod()
        old = pod["metadata"]["uid"] if pod else ""
        if pod is not None:
            name = pod["metadata"]["name"]
            self.kubectl(
                "delete", "pod", name, "-n", self.namespace, "--grace-period=0", "--force", check=False
            )

        def new_process() -> bool:
            now = self._pod()
            if now is None or now["metadata"]["uid"] == old or pod_pid(now) is None:
                return False
            return self.READY_LINE in self.current_log()

        wait_for("the operator's new Pod to run", new_process, 180, every=0.5)
        self.starts += 1

    def tail(self, lines: int = 30) -> str:
        pod = self._pod()
        if pod is None:
            return "(no operator Pod)"
        out = self.kubectl(
            "logs", pod["metadata"]["name"], "-n", self.namespace, f"--tail={lines}", check=False
        )
        return out.stdout


def worker_pods(kubectl: Kubectl, namespace: str, app: str) -> list[dict[str, Any]]:
    """The app's worker Pods (both colors) that are not being deleted."""
    out = kubectl.get("pods", "-n", namespace, "-l", f"{APP_LABEL}={app}")
    items: list[dict[str, Any]] = (out or {}).get("items") or []
    return [p for p in items if not p["metadata"].get("deletionTimestamp")]


class PodLogs:
    """Every worker Pod's log, followed from when it runs, one file per Pod (and UID).

    ``kubectl logs`` after a run reads only the Pods still there: a Pod a scale-in removed
    took its log with it, and that log held the answer to why a scale-in paused the group
    (its worker stopped cleanly, the broker dropped it only at its session timeout). So each
    ``poll`` starts ``kubectl logs -f`` for a running container not followed yet (a restarted
    container gets a follower of its own, appended to the Pod's file); ``close`` stops them.
    """

    def __init__(self, kubectl: Kubectl, namespace: str, app: str, dest: Path) -> None:
        self.kubectl, self.namespace, self.app, self.dest = kubectl, namespace, app, dest
        self._followers: dict[tuple[str, int], tuple[subprocess.Popen[bytes], Any]] = {}
        self._lock = threading.Lock()

    def poll(self) -> None:
        """Follow the containers that run now and are not followed (called every few seconds)."""
        with self._lock:
            for pod in worker_pods(self.kubectl, self.namespace, self.app):
                meta = pod["metadata"]
                for status in (pod.get("status") or {}).get("containerStatuses") or []:
                    if "running" not in (status.get("state") or {}):
                        continue
                    key = (str(meta.get("uid") or meta["name"]), int(status.get("restartCount") or 0))
                    if key in self._followers:
                        continue
                    path = self.dest / f"{meta['name']}-{key[0][:8]}.log"
                    sink = path.open("ab")
                    if key[1]:
                        sink.write(f"# container restart {key[1]}\n".encode())
                        sink.flush()
                    cmd = [str(self.kubectl.binary), f"--kubeconfig={self.kubectl.kubeconfig}", "logs", "-f"]
                    cmd += [meta["name"], "-n", self.namespace, "-c", str(status["name"])]
                    proc = subprocess.Popen(cmd, stdout=sink, stderr=subprocess.DEVNULL)
                    self._followers[key] = (proc, sink)

    def close(self) -> None:
        """Stop following: what each Pod wrote until now is in its file."""
        with self._lock:
            for proc, sink in self._followers.values():
                if proc.poll() is None:
                    proc.terminate()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(5)
                sink.close()
            self._followers.clear()


def pod_pid(pod: dict[str, Any]) -> int | None:
    """The host process id of a Pod's running container, if it runs (``containerd://<id>``,
    through the node's CRI)."""
    from batondev import node

    for status in (pod.get("status") or {}).get("containerStatuses") or []:
        cid = str(status.get("containerID") or "")
        if "running" not in (status.get("state") or {}):
            continue
        if cid.startswith("containerd://"):
            with contextlib.suppress(RuntimeError):  # the container went meanwhile
                return node.container_pid(cid) or None
    return None


def restarts(pods: Iterable[dict[str, Any]]) -> int:
    return sum(
        int(s.get("restartCount") or 0)
        for p in pods
        for s in (p.get("status") or {}).get("containerStatuses") or []
    )


@dataclass
class Verdict:
    """The sink output compared with what the input implies, per user: the counts 1..n in order."""

    records_in: int
    records_out: int
    lost: int
    duplicated: int
    out_of_order: int
    problems: list[str] = field(default_factory=list)

    @property
    def exact(self) -> bool:
        return self.lost == 0 and self.duplicated == 0 and self.out_of_order == 0 and not self.problems


def verdict(outputs: Iterable[tuple[bytes | None, bytes | None]], sent: dict[str, int]) -> Verdict:
    """Compare (key, value) outputs in topic order with ``sent`` (inputs per user).

    With the write cache off, one uninterrupted run emits 1, 2, ..., n for a user with n
    clicks. Anything missing is lost, anything seen twice is duplicated, and a count not
    greater than the one before it (per key, in partition order) is out of order.
    """
    per_key: dict[str, list[int]] = collections.defaultdict(list)
    problems: list[str] = []
    for key, value in outputs:
        if key is None or value is None:
            problems.append(f"record with key {key!r} value {value!r}")
            continue
        per_key[key.decode()].append(int(orjson.loads(value)))
    lost = duplicated = disorder = 0
    for user in sorted(set(per_key) | set(sent)):
        seq, n = per_key.get(user, []), sent.get(user, 0)
        seen = collections.Counter(seq)
        user_lost = sum(1 for c in range(1, n + 1) if c not in seen)
        user_dup = sum(k - 1 for k in seen.values() if k > 1) + sum(k for c, k in seen.items() if c > n)
        user_disorder = sum(1 for i in range(1, len(seq)) if seq[i] <= seq[i - 1])
        lost, duplicated, disorder = lost + user_lost, duplicated + user_dup, disorder + user_disorder
        if user_lost or user_dup or user_disorder:
            problems.append(
                f"{user}: {len(seq)} outputs for {n} inputs, lost {user_lost}, "
                f"duplicated/extra {user_dup}, out of order {user_disorder}"
            )
    return Verdict(
        records_in=sum(sent.values()),
        records_out=sum(len(v) for v in per_key.values()),
        lost=lost,
        duplicated=duplicated,
        out_of_order=disorder,
        problems=problems,
    )


def latest_counts(outputs: Iterable[tuple[bytes | None, bytes | None]]) -> dict[str, int]:
    """The last count per user in topic order: what a table built from the output would hold."""
    out: dict[str, int] = {}
    for key, value in outputs:
        if key is not None and value is not None:
            out[key.decode()] = int(orjson.loads(value))
    return out


def safe_name(text: str, limit: int = 40) -> str:
    """A DNS-1123 label fragment (Kafka topics accept it too)."""
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:limit].strip("-")
