"""The chaos scenario behind tests/e2e/test_chaos.py (short) and bench/chaos.py (long).

In one namespace: the CRDs, the operator installed with the chart, and the click counter as a
StreamApp (exactly-once, write cache off, two colors), all Pods on the stack's node from the
runtime image. Clicks arrive at
a fixed rate the whole time. Faults come one at a time on their own clock, also while a
deploy rolls out or flips (never during a rollback: a failed rollback flip is not retried
by the operator, by design):

* deletes a random worker Pod (``kubectl delete pod``: SIGTERM, the StatefulSet recreates it);
* SIGKILLs a random worker container's process (found through the node's CRI); the kubelet
  restarts it;
* kills the operator's Pod (``--grace-period=0 --force``); the Deployment's new Pod takes
  over through its Lease;
* SIGKILLs the kubelet and starts it again (the containers keep running);
* deploys a new version: a spec change (a podTemplate env var) that the operator rolls out
  blue-green and flips;
* rolls back right after a deploy (the operator flips back to the old color).

Then the input stops, the output must catch up, and the ``read_committed`` sink topic is
compared record by record with what the input implies (per user 1..n: nothing lost,
nothing duplicated, nothing reordered), and the StreamApp must be Ready again.

**Deploys and rollbacks go through the operator** (its blue-green flow, issue 6): the
scenario only applies the spec change and waits until ``status.activeColor`` and the
control topic both name the other color with the phase back at ``Stable``; the operator
updates the idle color, waits until it is ready and caught up, flips, and later upgrades
the old color. A rollback is the ``baton.dev/rollback`` annotation, right after a deploy
while the old color is still warm on the old revision. Every second deploy also has the
operator SIGKILLed mid-deploy. The scenario never flips by itself: an operator that stops
flipping fails the run instead of being papered over.
"""

from __future__ import annotations

import collections
import contextlib
import os
import random
import signal
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient

from baton.control.channel import ControlReader, control_topic
from baton.control.coordinator import current_state
from baton.control.messages import Color
from baton.testing import SteadyInput, read_all, wait_for

from . import e2e, node, procs

FAULT_KINDS = ("delete-pod", "kill-worker", "restart-operator", "restart-kubelet")
APP = "click-counter"
VERSION_VAR = "CHAOS_VERSION"


ANNOTATION_ROLLBACK = "baton.dev/rollback"


@dataclass
class ChaosConfig:
    faults: int = 6
    fault_interval_s: float = 6.0
    deploys: int = 1
    rollbacks: int = 0
    rate: int = 50  # clicks per second
    min_input_s: float = 0.0  # keep the input running at least this long (bench's duration)
    # Deploy i starts at i * deploy_every_s; 0: each one shortly after the one before.
    deploy_every_s: float = 0.0
    replicas: int = 2
    standby_replicas: int = 1
    partitions: int = 4
    seed: int = 7
    # spec.upgrade.stateMigration of deploy i is state_migrations[i % len]. Rebuild gives the
    # idle color a new application id generation (empty state, input from offset 0) that must
    # catch up silently and emit nothing twice.
    state_migrations: tuple[str, ...] = ("Reuse",)
    # Every second deploy also gets the operator SIGKILLed mid-deploy (Promoting or Flipping):
    # it must pick the deploy up from status.deploy and never flip twice.
    operator_restart_in_deploy: bool = True
    ready_timeout_s: float = 300.0
    catch_up_timeout_s: float = 300.0
    # The runtime image the operator's and the workers' Pods run, imported into the node.
    node_image: str = ""


@dataclass
class Event:
    """One injected fault or deploy: what, on what, when (seconds after the input started)."""

    kind: str
    target: str
    at_s: float
    took_s: float = 0.0
    detail: str = ""
    recovered: bool = False  # the harmed process was seen running again (workers and the operator)


@dataclass
class ChaosReport:
    config: ChaosConfig
    events: list[Event]
    verdict: e2e.Verdict
    input_s: float
    catch_up_s: float
    total_s: float
    final_ready: bool
    final_active: str
    pod_restarts: int  # restartCount of the Pods at the end (a rollout resets it)
    users: int

    @property
    def passed(self) -> bool:
        return self.verdict.exact and self.final_ready

    @property
    def faults(self) -> int:
        return sum(1 for e in self.events if e.kind in FAULT_KINDS)

    @property
    def repaired(self) -> int:
        return sum(1 for e in self.events if e.kind in FAULT_KINDS and e.recovered)

    def took_by_kind(self) -> dict[str, str]:
        """Median and longest time per kind, from the fault to the process running again
        (workers), the new operator talking to the API (operator), or the flip seen (deploys)."""
        times: dict[str, list[float]] = collections.defaultdict(list)
        for e in self.events:
            times[e.kind].append(e.took_s)
        return {
            k: f"median {statistics.median(v):.1f} s, max {max(v):.1f} s" for k, v in sorted(times.items())
        }

    def by_kind(self) -> dict[str, int]:
        return dict(collections.Counter(e.kind for e in self.events))

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["by_kind"] = self.by_kind()
        out["passed"] = self.passed
        out["faults"], out["repaired"] = self.faults, self.repaired
        out["took_by_kind"] = self.took_by_kind()
        return out

    def events_table(self) -> str:
        lines = [f"{'t (s)':>7}  {'kind':<17} {'target':<28} {'took':>6}  detail"]
        for e in self.events:
            lines.append(f"{e.at_s:7.1f}  {e.kind:<17} {e.target:<28} {e.took_s:5.1f}s  {e.detail}")
        return "\n".join(lines)

    def summary_table(self) -> str:
        v = self.verdict
        rows = [
            ("faults + deploys", ", ".join(f"{k} {n}" for k, n in sorted(self.by_kind().items()))),
            ("input duration", f"{self.input_s:.0f} s at {self.config.rate}/s"),
            ("catch-up after input", f"{self.catch_up_s:.1f} s"),
            ("total duration", f"{self.total_s:.0f} s"),
            ("records in / out", f"{v.records_in} / {v.records_out} ({self.users} users)"),
            ("lost", str(v.lost)),
            ("duplicated", str(v.duplicated)),
            ("out of order", str(v.out_of_order)),
            ("faults repaired", f"{self.repaired} of {self.faults} (process seen running again)"),
            *((f"  {kind} took", took) for kind, took in self.took_by_kind().items()),
            ("final Ready", f"{self.final_ready} (active {self.final_active})"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {val}" for k, val in rows)


def plan(cfg: ChaosConfig, rng: random.Random) -> list[str]:
    """The order of events: every fault kind early, deploys spread out, each rollback after a deploy."""
    faults: list[str] = []
    while len(faults) < cfg.faults:
        kinds = list(FAULT_KINDS)
        rng.shuffle(kinds)
        faults += kinds
    events = faults[: cfg.faults]
    slots = len(events) + cfg.deploys
    for i in range(cfg.deploys):
        at = round((i + 1) * slots / (cfg.deploys + 1))
        events.insert(min(at, len(events)), "deploy")
    out: list[str] = []
    rollbacks = cfg.rollbacks
    for kind in events:
        out.append(kind)
        if kind == "deploy" and rollbacks > 0:
            out.append("rollback")
            rollbacks -= 1
    return out


@dataclass
class _Context:
    cfg: ChaosConfig
    namespace: str
    bootstrap: str
    clicks: str
    counts: str
    application_id: str
    kubectl: e2e.Kubectl
    operator: e2e.PodOperator
    body: dict[str, Any]
    rng: random.Random
    say: Callable[[str], None]
    version: int = 1
    events: list[Event] = field(default_factory=list)
    t0: float = 0.0  # when the input started: event times count from here
    pending_faults: list[str] = field(default_factory=list)
    next_fault_at: float = 0.0
    injecting: bool = False


class Chaos:
    """Run the scenario once in ``namespace`` (which must exist) with the given topics."""

    def __init__(
        self,
        cfg: ChaosConfig,
        *,
        namespace: str,
        bootstrap: str,
        clicks_topic: str,
        counts_topic: str,
        workdir: Path,
        say: Callable[[str], None] = print,
    ) -> None:
        self.cfg, self.namespace, self.bootstrap = cfg, namespace, bootstrap
        self.clicks, self.counts, self.workdir, self.say = clicks_topic, counts_topic, workdir, say
        # Unique per run: a reused id would inherit consumer offsets and changelogs.
        self.application_id = f"chaos-{uuid.uuid4().hex[:8]}"

    def run(self) -> ChaosReport:
        started = time.monotonic()
        cfg = self.cfg
        kubectl = e2e.Kubectl.local()
        e2e.install_crds(kubectl)
        self.workdir.mkdir(parents=True, exist_ok=True)
        if not cfg.node_image:
            raise ValueError("ChaosConfig.node_image: the runtime image to run (dev/image load runtime)")
        operator = e2e.PodOperator(self.namespace, cfg.node_image, self.workdir / "operator.log")
        body = e2e.click_counter_app(
            name=APP,
            namespace=self.namespace,
            bootstrap=self.bootstrap,
            clicks_topic=self.clicks,
            counts_topic=self.counts,
            application_id=self.application_id,
            replicas=cfg.replicas,
            standby_replicas=cfg.standby_replicas,
            env={VERSION_VAR: "v1"},
            state_migration=cfg.state_migrations[0],
        )
        body["spec"]["image"] = cfg.node_image
        body["spec"]["podTemplate"]["tolerations"] = [node.TOLERATION]
        ctx = _Context(
            cfg,
            self.namespace,
            self.bootstrap,
            self.clicks,
            self.counts,
            self.application_id,
            kubectl,
            operator,
            body,
            random.Random(cfg.seed),
            self.say,
        )
        self.say(f"on node {node.NAME} from {cfg.node_image}; operator: helm release {operator.release}")
        operator.start()
        try:
            return self._scenario(ctx, started)
        except TimeoutError as exc:
            # CI shows the exception, not the logs in tmp_path: carry the evidence in it.
            errors = [line for line in operator.tail(400).splitlines() if " ERROR " in line][-5:]
            state = "running" if operator.pid else "not running"
            raise TimeoutError(
                f"{exc}\noperator {state}; its errors (last 5):\n" + "\n".join(errors or ["none"])
            ) from None
        finally:
            # The operator deletes the app's internal topics (deletionPolicy DeleteTopics).
            kubectl("delete", "sapp", APP, "-n", self.namespace, "--wait=true", "--timeout=90s", check=False)
            operator.kill(signal.SIGTERM)

    def _scenario(self, ctx: _Context, started: float) -> ChaosReport:
        cfg, kubectl = ctx.cfg, ctx.kubectl
        kubectl.apply(ctx.body)
        e2e.wait_app_ready(kubectl, ctx.namespace, APP, cfg.ready_timeout_s)
        self.say(
            f"StreamApp {APP} (applicationId {ctx.application_id}) Ready after {time.monotonic() - started:.0f}s"
        )
        events = plan(cfg, ctx.rng)
        self.say(
            f"plan: faults {', '.join(k for k in events if k in FAULT_KINDS)} every {cfg.fault_interval_s:.0f}s; "
            f"meanwhile {', '.join(k for k in events if k not in FAULT_KINDS)}; {cfg.rate} clicks/s"
        )
        with SteadyInput(ctx.bootstrap, ctx.clicks, rate=cfg.rate, seed=cfg.seed) as steady:
            t0 = ctx.t0 = time.monotonic()
            # Faults keep their own clock, also while a deploy is rolling out or flipping.
            ctx.pending_faults = [k for k in events if k in FAULT_KINDS]
            ctx.next_fault_at = t0 + cfg.fault_interval_s
            deploys, last_end = 0, t0
            for kind in (k for k in events if k not in FAULT_KINDS):
                if kind == "deploy":
                    deploys += 1
                    start = (
                        t0 + deploys * cfg.deploy_every_s
                        if cfg.deploy_every_s
                        else last_end + cfg.fault_interval_s / 2
                    )
                    _wait_ticking(ctx, partial(_past, start))
                _run(ctx, kind)  # a rollback follows its deploy at once, while the old color is warm
                last_end = time.monotonic()
            _wait_ticking(ctx, lambda: not ctx.pending_faults)
            _sleep_until(max(t0 + cfg.min_input_s, time.monotonic() + cfg.fault_interval_s / 2))
        input_s = time.monotonic() - t0
        sent = dict(steady.sent)
        self.say(f"input stopped after {input_s:.0f}s: {sum(sent.values())} clicks; waiting for the output")
        caught = time.monotonic()
        final_counts: dict[str, int] = {}

        def caught_up() -> bool:
            final_counts.clear()
            final_counts.update(_latest_counts(ctx.bootstrap, ctx.counts))
            return final_counts == sent

        with contextlib.suppress(TimeoutError):
            wait_for("the output to catch up with the input", caught_up, cfg.catch_up_timeout_s, every=2)
        catch_up_s = time.monotonic() - caught
        outputs = [(r.key, r.value) for r in read_all(ctx.bootstrap, ctx.counts)]
        verdict = e2e.verdict(outputs, sent)
        final_ready = True
        try:
            kubectl(
                "wait",
                "--for=condition=Ready",
                f"sapp/{APP}",
                "-n",
                ctx.namespace,
                f"--timeout={int(cfg.ready_timeout_s)}s",
                timeout=cfg.ready_timeout_s + 30,
            )
        except RuntimeError as exc:
            self.say(f"not Ready: {exc}")
            final_ready = False
        pods = e2e.worker_pods(kubectl, ctx.namespace, APP)
        return ChaosReport(
            config=cfg,
            events=sorted(ctx.events, key=lambda e: e.at_s),
            verdict=verdict,
            input_s=input_s,
            catch_up_s=catch_up_s,
            total_s=time.monotonic() - started,
            final_ready=final_ready,
            final_active=_active_color(ctx),
            pod_restarts=e2e.restarts(pods),
            users=len(sent),
        )


def _run(ctx: _Context, kind: str) -> Event:
    """Inject one event now and record it (time from the input's start, and how long it took)."""
    at = time.monotonic() - ctx.t0
    event = INJECT[kind](ctx)
    event.at_s, event.took_s = at, time.monotonic() - ctx.t0 - at
    ctx.events.append(event)
    ctx.say(f"[{at:6.1f}s] {event.kind:<17} {event.target:<28} {event.detail}")
    return event


def _tick(ctx: _Context) -> None:
    """Inject the next fault if it is due (called from every wait loop of the scenario)."""
    if ctx.injecting or not ctx.pending_faults or time.monotonic() < ctx.next_fault_at:
        return
    ctx.injecting = True  # a fault's own waits never start another fault
    try:
        _run(ctx, ctx.pending_faults.pop(0))
    finally:
        ctx.injecting = False
    ctx.next_fault_at = time.monotonic() + ctx.cfg.fault_interval_s


def _past(deadline: float) -> bool:
    return time.monotonic() >= deadline


def _wait_ticking(ctx: _Context, done: Callable[[], bool]) -> None:
    while not done():
        _tick(ctx)
        time.sleep(0.2)


def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        time.sleep(delay)


def _latest_counts(bootstrap: str, topic: str) -> dict[str, int]:
    return e2e.latest_counts((r.key, r.value) for r in read_all(bootstrap, topic))


def _random_pod(ctx: _Context, running: bool) -> dict[str, Any]:
    """A random worker Pod of either color (with a running process if ``running``)."""

    def pick() -> dict[str, Any] | None:
        pods = e2e.worker_pods(ctx.kubectl, ctx.namespace, APP)
        if running:
            pods = [p for p in pods if e2e.pod_pid(p)]
        return ctx.rng.choice(sorted(pods, key=lambda p: str(p["metadata"]["name"]))) if pods else None

    return wait_for("a worker Pod to hit", pick, 120, every=1)


def _new_process(ctx: _Context, name: str, old_pid: int | None, timeout: float = 120) -> int:
    """Wait until Pod ``name`` runs a process other than ``old_pid`` (restarted or recreated).

    This is the evidence that a fault hit a real worker and that the cluster repaired it; a
    rollout that replaces the Pod meanwhile counts too (it also runs a new process).
    """

    def check() -> int | None:
        pod = ctx.kubectl.get("pod", name, "-n", ctx.namespace)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            return None
        pid = e2e.pod_pid(pod)
        return pid if pid and pid != old_pid else None

    return wait_for(f"Pod {name} to run a new process", check, timeout, every=0.5)


def _delete_pod(ctx: _Context) -> Event:
    pod = _random_pod(ctx, running=False)
    name, pid = pod["metadata"]["name"], e2e.pod_pid(pod)
    started = time.monotonic()
    ctx.kubectl("delete", "pod", name, "-n", ctx.namespace, "--wait=false")
    new = _new_process(ctx, name, pid)
    return Event(
        "delete-pod",
        name,
        0,
        detail=f"kubectl delete pod (SIGTERM to pid {pid}); recreated, pid {new} after "
        f"{time.monotonic() - started:.1f}s",
        recovered=True,
    )


def _kill_worker(ctx: _Context) -> Event:
    pod = _random_pod(ctx, running=True)
    name, pid = pod["metadata"]["name"], e2e.pod_pid(pod)
    assert pid is not None
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    new = _new_process(ctx, name, pid)
    return Event(
        "kill-worker",
        name,
        0,
        detail=f"SIGKILL pid {pid}; restarted as pid {new} after {time.monotonic() - started:.1f}s",
        recovered=True,
    )


def _restart_operator(ctx: _Context) -> Event:
    old = ctx.operator.pid
    ctx.operator.restart()
    return Event(
        "restart-operator",
        "baton operator",
        0,
        detail=f"Pod killed (pid {old}), new Pod's pid {ctx.operator.pid} (start #{ctx.operator.starts})",
        recovered=True,
    )


def _restart_kubelet(ctx: _Context) -> Event:
    """SIGKILL the kubelet, as a crash would, and start it again: running containers must stay."""
    before = {p["metadata"]["name"]: e2e.pod_pid(p) for p in e2e.worker_pods(ctx.kubectl, ctx.namespace, APP)}
    pid = procs.running_pid(node.KUBELET)
    assert pid is not None, "the node's kubelet is not running"
    started = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    wait_for("the kubelet to exit", lambda: procs.running_pid(node.KUBELET) is None, 30)
    node.start_kubelet()
    after = {p["metadata"]["name"]: e2e.pod_pid(p) for p in e2e.worker_pods(ctx.kubectl, ctx.namespace, APP)}
    kept = sum(1 for name, old in before.items() if old and after.get(name) == old)
    return Event(
        "restart-kubelet",
        node.NAME,
        0,
        detail=f"SIGKILL pid {pid}; Ready again after {time.monotonic() - started:.1f}s; "
        f"{kept} of {len(before)} worker containers kept running",
        recovered=True,
    )


def _active_color(ctx: _Context) -> Color:
    """The color in force, from the control topic (the truth the workers' sink gates follow)."""
    reader = ControlReader(ctx.bootstrap, control_topic(ctx.application_id))
    try:
        state, _ = current_state(list(reader.read_to_end()))
    finally:
        reader.close()
    return state.active


def _deploy(ctx: _Context) -> Event:
    """A new version (a podTemplate env change) rolled out and flipped by the operator."""
    ctx.version += 1
    version = f"v{ctx.version}"
    before = _active_color(ctx)
    target: Color = "green" if before == "blue" else "blue"
    e2e.set_env(ctx.body, VERSION_VAR, version)
    migrations = ctx.cfg.state_migrations
    migration = migrations[(ctx.version - 2) % len(migrations)]  # v2 is the first deploy
    ctx.body["spec"]["upgrade"]["stateMigration"] = migration
    ctx.kubectl.apply(ctx.body)
    seen: list[str] = []
    mid_deploy_restart = ctx.cfg.operator_restart_in_deploy and ctx.version % 2 == 1  # v3, v5, ...
    restarted: list[Event] = []

    def flipped() -> bool:
        _tick(ctx)  # faults go on during the rollout and the flip
        st = _status(ctx)
        phase = str(st.get("phase"))
        if not seen or seen[-1] != phase:
            seen.append(phase)
        if phase in ("Promoting", "Flipping") and mid_deploy_restart and not restarted:
            restarted.append(_mid_deploy_restart(ctx, phase))
        return st.get("activeColor") == target and phase == "Stable" and _active_color(ctx) == target

    wait_for(
        f"the operator to deploy {version} and flip to {target}", flipped, ctx.cfg.ready_timeout_s, every=1
    )
    app_id = ((_status(ctx).get("colors") or {}).get(target) or {}).get("applicationId", "?")
    return Event(
        "deploy",
        f"{VERSION_VAR}={version}",
        0,
        detail=f"{migration}: operator flipped {before} -> {target} ({app_id}; {' -> '.join(seen)})",
    )


def _mid_deploy_restart(ctx: _Context, phase: str) -> Event:
    at = time.monotonic()
    old = ctx.operator.pid
    ctx.operator.restart()
    event = Event(
        "restart-operator",
        "baton operator",
        at - ctx.t0,
        time.monotonic() - at,
        detail=f"mid-deploy ({phase}): Pod killed (pid {old}), new Pod's pid {ctx.operator.pid}",
        recovered=True,
    )
    ctx.events.append(event)
    ctx.say(f"[{event.at_s:6.1f}s] {event.kind:<17} {event.target:<28} {event.detail}")
    return event


def _rollback(ctx: _Context) -> Event:
    """The operator's rollback annotation: flip back to the old color, still warm on the old version."""
    before = _active_color(ctx)
    target: Color = "green" if before == "blue" else "blue"
    ctx.kubectl("annotate", "sapp", APP, "-n", ctx.namespace, f"{ANNOTATION_ROLLBACK}=true", "--overwrite")

    def back() -> bool:
        st = _status(ctx)
        return (
            st.get("activeColor") == target and st.get("phase") == "Stable" and _active_color(ctx) == target
        )

    wait_for(f"the rollback to {target}", back, ctx.cfg.ready_timeout_s, every=1)
    return Event("rollback", APP, 0, detail=f"annotation {ANNOTATION_ROLLBACK}: {before} -> {target}")


def _status(ctx: _Context) -> dict[str, Any]:
    status: dict[str, Any] = e2e.app_object(ctx.kubectl, ctx.namespace, APP).get("status") or {}
    return status


INJECT: dict[str, Callable[[_Context], Event]] = {
    "delete-pod": _delete_pod,
    "kill-worker": _kill_worker,
    "restart-operator": _restart_operator,
    "restart-kubelet": _restart_kubelet,
    "deploy": _deploy,
    "rollback": _rollback,
}


def create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(n, partitions, 1) for n in names]).values():
        fut.result(30)


def delete_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.delete_topics(names).values():
        with contextlib.suppress(Exception):
            fut.result(30)
