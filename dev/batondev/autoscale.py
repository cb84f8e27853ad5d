"""The autoscaling scenario behind tests/e2e/test_autoscale_node.py (short) and bench/autoscale.py.

In one namespace: the CRDs, the operator installed with the chart (its autoscaling pass every
``operator_interval_s``), and ``examples/lookup_counter.py`` as a StreamApp with
``spec.autoscaling`` (exactly-once; write cache off by default, so every click gives one count),
all Pods on the stack's node from the runtime image. The topology waits ``lookup_wait_ms`` per record
(a stand-in for a remote call), so one replica serves a known rate whatever the CPU and the
input needs more Pods, not more cores, as it rises.

The input follows a piecewise-linear rate profile over known keys; every record carries the
wall time it was produced. The sink topic stamps appends with the broker's clock
(``LogAppendTime``), and a key's n-th count answers its n-th click, so each output record
gives an end-to-end latency (append time minus the click's timestamp), and each sink
partition's appends give its output pauses (the sink partition of a count is the input
partition of its click: both use the Java client's partitioner).

While the input runs, a sampler reads every ``sample_every_s``: the StreamApp's
``status.autoscaling`` (current, desired, the running step, what holds it), the active
StatefulSet's replicas, and the active group's lag (committed against end offsets). After the
input stops and the output has caught up, the sink topic is read once, streaming (millions of
records: no list of them is kept): the counts must be exactly 1..n per key in order, and the
p99 latency per sample and the longest pause of any partition during each scaling step come
from it.

Two modes: **warmups** (the default ``acceptableRecoveryLag``: a new Pod builds a task's state
as a warmup before it owns the task) and **at once** (``acceptableRecoveryLag`` as large as it
goes: every member counts as caught up, so tasks move to a new Pod as soon as it joins and
restore there from the changelog while their partitions wait).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import datetime
import itertools
import math
import random
import signal
import threading
import time
import uuid
from array import array
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from baton.testing import end_offsets, group_committed, wait_for

from . import e2e, node

APP = "lookup-counter"
TOPOLOGY = "examples.lookup_counter:topology"
AT_ONCE_LAG = 2**63 - 1  # spec.acceptableRecoveryLag's int64 maximum: every member is caught up
MODES = ("warmups", "at once")


@dataclass
class AutoscaleConfig:
    # (seconds after the input starts, records/s) points; the rate is linear between them
    profile: tuple[tuple[float, float], ...]
    mode: str = "warmups"
    partitions: int = 12
    keys: int = 1200
    lookup_wait_ms: float = 0.6
    # the worker's write cache: off, every click gives one count; on (Baton's default), each
    # commit (100 ms under exactly-once) sends a key's latest count, so a key's counts skip
    # ahead and the output check wants them strictly increasing, ending at the key's clicks
    write_cache: bool = False
    min_replicas: int = 1
    max_replicas: int = 6
    standby_replicas: int = 0
    lag_seconds: float = 3.0  # spec.autoscaling.lagSeconds: per partition, seconds of its input
    target_utilization: float = 0.7
    scale_up_window_s: int = 30
    scale_down_window_s: int = 60
    # spec.autoscaling.behavior policies; None: the CRD's defaults
    scale_up_policies: list[dict[str, Any]] | None = None
    scale_down_policies: list[dict[str, Any]] | None = None
    step_timeout_s: int = 180
    probing_rebalance_ms: int = 5000
    operator_interval_s: float = 5.0  # BATON_AUTOSCALING_INTERVAL_SECONDS
    sample_every_s: float = 3.0
    seed: int = 7
    ready_timeout_s: float = 300.0
    catch_up_timeout_s: float = 600.0
    # after the input: wait (sampling) until the active color is back at this many replicas
    settle_to_replicas: int | None = None
    settle_timeout_s: float = 120.0
    node_image: str = ""

    @property
    def duration_s(self) -> float:
        return self.profile[-1][0]

    def rate_at(self, t: float) -> float:
        """The profile's input rate ``t`` seconds after the input started (0 after its end)."""
        points = self.profile
        if t < points[0][0] or t >= points[-1][0]:
            return 0.0
        i = bisect.bisect_right([p[0] for p in points], t)
        (t0, r0), (t1, r1) = points[i - 1], points[i]
        return r0 if t1 <= t0 else r0 + (r1 - r0) * (t - t0) / (t1 - t0)


@dataclass
class Sample:
    t: float  # seconds after the input started
    target_rate: float  # the profile's rate then
    input_rate: float  # records/s produced since the last sample
    replicas: int | None  # the active StatefulSet's spec.replicas
    ready: int | None
    current: int | None  # status.autoscaling
    desired: int | None
    held_by: str | None
    step: dict[str, Any] | None
    lag: int | None  # summed over the partitions of the active group
    lag_max: int | None  # the worst partition
    reason: str = ""
    p99_s: float | None = None  # filled from the output: appends within (previous sample, this one]
    outputs: int = 0


@dataclass
class Step:
    """One scaling step of the active color, as ``status.autoscaling.step`` showed it."""

    from_replicas: int
    to_replicas: int
    start_t: float
    end_t: float | None
    phases: list[str]
    longest_pause_s: float | None = None
    pause_partition: int | None = None
    baseline_pause_s: float | None = None  # the same measure over the 20 s before the step
    rate_at_start: float = 0.0
    reason: str = ""  # the operator's, when the step started (status.autoscaling.step.reason)

    @property
    def duration_s(self) -> float | None:
        return None if self.end_t is None else self.end_t - self.start_t


@dataclass
class Check:
    """The output against the input, per key: the counts 1..n in order and nothing else (with
    ``coalesced``, the write cache's output: strictly increasing counts ending at n)."""

    records_in: int = 0
    records_out: int = 0
    lost: int = 0
    duplicated: int = 0
    out_of_order: int = 0
    problems: list[str] = field(default_factory=list)
    coalesced: bool = False

    @property
    def exact(self) -> bool:
        return (
            (self.coalesced or self.records_in == self.records_out)
            and not (self.lost or self.duplicated or self.out_of_order)
            and not self.problems
        )


@dataclass
class AutoscaleReport:
    config: AutoscaleConfig
    namespace: str
    samples: list[Sample]
    steps: list[Step]
    check: Check
    scale_events: list[dict[str, Any]]
    input_s: float
    catch_up_s: float
    total_s: float
    p99_overall_s: float | None
    settled: bool
    input_started_at: float = 0.0  # wall clock (s): sample and step times count from here

    @property
    def passed(self) -> bool:
        return self.check.exact

    def replica_changes(self, start_t: float, end_t: float) -> int:
        """How often the active StatefulSet's replicas changed between the samples in [start, end]."""
        seen = [s.replicas for s in self.samples if start_t <= s.t <= end_t and s.replicas is not None]
        return sum(1 for a, b in itertools.pairwise(seen) if a != b)

    def early_scale_out(self, before_t: float, low_rate: float) -> str | None:
        """Why the first scale-out, if it came before ``before_t`` (at the low rate), was wrong.

        One replica keeps up with the low rate on an idle machine; on a loaded one (CI: Spark
        jobs and other tests beside the node, the idle color's Pod starting) it may not, and
        then scaling out is right. It is right only if the active group was behind its lag
        target (here from committed offsets, not from what the operator read) in every sample
        of the scale-up window before the step. None: no such problem."""
        cfg = self.config
        outs = [st for st in self.steps if st.to_replicas > st.from_replicas]
        if not outs or outs[0].start_t >= before_t:
            return None
        first = outs[0]
        lag_target = cfg.lag_seconds * low_rate / cfg.partitions  # per task (partition)
        window = [
            s
            for s in self.samples
            if first.start_t - cfg.scale_up_window_s <= s.t <= first.start_t and s.lag_max is not None
        ]
        behind = [s for s in window if s.lag_max is not None and s.lag_max > lag_target]
        if window and len(behind) == len(window):
            return None
        return (
            f"scaled out {first.from_replicas} -> {first.to_replicas} at {first.start_t:.0f}s, before "
            f"{before_t:.0f}s, while the group kept up with {low_rate:.0f} records/s: {len(behind)} of "
            f"{len(window)} samples of the {cfg.scale_up_window_s:.0f}s before it over the lag target "
            f"of {lag_target:.0f} records a partition"
        )

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["passed"] = self.passed
        out["max_replicas_seen"] = max((s.replicas or 0 for s in self.samples), default=0)
        return out

    def samples_table(self, every_s: float = 0.0) -> str:
        """Time, input rate, replicas, desired, lag, p99: each sample, or one row per ``every_s``
        (rates and p99 the bucket's mean and worst, replicas and desired at its end)."""
        lines = [
            f"{'t (s)':>6} {'target/s':>9} {'input/s':>8} {'replicas':>9} {'desired':>8} "
            f"{'lag':>8} {'p99 (s)':>8}  step"
        ]
        rows: list[list[Sample]] = []
        for s in self.samples:
            if not rows or (every_s and s.t >= rows[-1][0].t + every_s) or not every_s:
                rows.append([s])
            else:
                rows[-1].append(s)
        for bucket in rows:
            last = bucket[-1]
            p99s = [s.p99_s for s in bucket if s.p99_s is not None]
            lags = [s.lag for s in bucket if s.lag is not None]
            replicas = f"{last.replicas}/{last.ready}" if last.replicas is not None else "?"  # spec / ready
            step = next((s.step for s in reversed(bucket) if s.step), None)
            lines.append(
                f"{last.t:6.0f} {sum(s.target_rate for s in bucket) / len(bucket):9.0f} "
                f"{sum(s.input_rate for s in bucket) / len(bucket):8.0f} {replicas:>9} "
                f"{last.desired if last.desired is not None else '?':>8} "
                f"{max(lags) if lags else '?':>8} {f'{max(p99s):.2f}' if p99s else '-':>8}  "
                + (f"{step.get('from')}->{step.get('to')} {step.get('phase')}" if step else "")
            )
        return "\n".join(lines)

    def steps_table(self) -> str:
        lines = [
            f"{'from->to':>8}  {'mode':<8} {'at (s)':>6} {'rate/s':>7} {'took (s)':>8} "
            f"{'longest pause (s)':>17} {'baseline (s)':>12}  phases"
        ]
        for st in self.steps:
            took = f"{st.duration_s:.0f}" if st.duration_s is not None else "running"
            pause = (
                f"{st.longest_pause_s:.2f} (p{st.pause_partition})"
                if st.longest_pause_s is not None
                else "n/a"
            )
            base = f"{st.baseline_pause_s:.2f}" if st.baseline_pause_s is not None else "n/a"
            lines.append(
                f"{st.from_replicas:>3}->{st.to_replicas:<3}  {self.config.mode:<8} {st.start_t:6.0f} "
                f"{st.rate_at_start:7.0f} {took:>8} {pause:>17} {base:>12}  {' > '.join(st.phases)}"
            )
        return "\n".join(lines)

    def reasons(self) -> str:
        """Why the operator started each step, in its words."""
        return "\n".join(
            f"{st.from_replicas}->{st.to_replicas} at {st.start_t:.0f}s: {st.reason}" for st in self.steps
        )

    def summary_table(self) -> str:
        c = self.check
        rows = [
            ("mode", self.config.mode),
            ("input", f"{self.input_s:.0f} s, {c.records_in:,} records over {self.config.keys} keys"),
            ("records out", f"{c.records_out:,}"),
            ("lost / duplicated / out of order", f"{c.lost} / {c.duplicated} / {c.out_of_order}"),
            ("counts exact", str(c.exact)),
            ("max replicas", str(max((s.replicas or 0 for s in self.samples), default=0))),
            (
                "scale events",
                ", ".join(f"{e.get('from')}->{e.get('to')}" for e in self.scale_events) or "none",
            ),
            (
                "p99 latency, whole run",
                f"{self.p99_overall_s:.2f} s" if self.p99_overall_s is not None else "-",
            ),
            ("catch-up after input", f"{self.catch_up_s:.1f} s"),
            ("settled", str(self.settled)),
            ("total", f"{self.total_s:.0f} s"),
        ]
        width = max(len(k) for k, _ in rows)
        return "\n".join(f"{k:<{width}}  {v}" for k, v in rows)


def app_body(
    cfg: AutoscaleConfig, *, namespace: str, bootstrap: str, clicks: str, counts: str, app_id: str
) -> dict[str, Any]:
    """The lookup counter as a StreamApp with spec.autoscaling, on the node's image."""
    body = e2e.click_counter_app(
        name=APP,
        namespace=namespace,
        bootstrap=bootstrap,
        clicks_topic=clicks,
        counts_topic=counts,
        application_id=app_id,
        replicas=cfg.min_replicas,
        standby_replicas=cfg.standby_replicas,
        env={"LOOKUP_WAIT_MS": str(cfg.lookup_wait_ms)},
        write_cache=cfg.write_cache,
    )
    spec = body["spec"]
    spec["image"] = cfg.node_image
    spec["topology"] = TOPOLOGY
    spec["podTemplate"]["tolerations"] = [node.TOLERATION]
    spec["probingRebalanceIntervalMs"] = cfg.probing_rebalance_ms
    if cfg.mode == "at once":
        spec["acceptableRecoveryLag"] = AT_ONCE_LAG
    elif cfg.mode != "warmups":
        raise ValueError(f"mode {cfg.mode!r}: one of {MODES}")
    up: dict[str, Any] = {"stabilizationWindowSeconds": cfg.scale_up_window_s}
    down: dict[str, Any] = {"stabilizationWindowSeconds": cfg.scale_down_window_s}
    if cfg.scale_up_policies is not None:
        up["policies"] = cfg.scale_up_policies
    if cfg.scale_down_policies is not None:
        down["policies"] = cfg.scale_down_policies
    spec["autoscaling"] = {
        "minReplicas": cfg.min_replicas,
        "maxReplicas": cfg.max_replicas,
        "lagSeconds": cfg.lag_seconds,
        "targetUtilization": cfg.target_utilization,
        "stepTimeoutSeconds": cfg.step_timeout_s,
        "behavior": {"scaleUp": up, "scaleDown": down},
    }
    return body


class RampInput:
    """Produces clicks at the profile's rate in a background thread, keeping per key the wall
    time (ms) of each click: a key's n-th count answers its n-th click."""

    TICK_S = 0.01

    def __init__(self, bootstrap: str, topic: str, cfg: AutoscaleConfig) -> None:
        self.bootstrap, self.topic, self.cfg = bootstrap, topic, cfg
        self.users = [f"user-{i:05d}" for i in range(cfg.keys)]
        self.sent_ms: dict[str, array[int]] = {u: array("q") for u in self.users}
        self.produced = 0
        self.t0 = 0.0  # wall time the input started
        self.failed: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="ramp-input", daemon=True)

    def _delivered(self, err: KafkaError | None, _msg: object) -> None:
        if err is not None:
            self.failed.append(str(err))

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "partitioner": "murmur2_random",  # the Java client's: the sink partition follows
                "enable.idempotence": True,
                "linger.ms": 5,
            }
        )
        rng = random.Random(self.cfg.seed)
        owed, last = 0.0, time.time()
        while not self._stop.is_set():
            now = time.time()
            t = now - self.t0
            if t >= self.cfg.duration_s:
                break
            owed += self.cfg.rate_at(t) * (now - last)
            last = now
            n = int(owed)
            owed -= n
            ms = int(now * 1000)
            for _ in range(n):
                user = rng.choice(self.users)
                while True:
                    try:
                        producer.produce(
                            self.topic,
                            orjson.dumps({"user_id": user, "timestamp": ms}),
                            user.encode(),
                            timestamp=ms,
                            on_delivery=self._delivered,
                        )
                        break
                    except BufferError:
                        producer.poll(0.05)
                self.sent_ms[user].append(ms)
            self.produced += n
            producer.poll(0)
            time.sleep(max(0.0, self.TICK_S - (time.time() - now)))
        remaining = producer.flush(60)
        if remaining:
            self.failed.append(f"{remaining} records not delivered")

    def start(self) -> None:
        self.t0 = time.time()
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(90)

    def sent(self) -> dict[str, int]:
        return {u: len(v) for u, v in self.sent_ms.items() if v}


class Sampler:
    """Reads the StreamApp, its StatefulSets and the active group's lag every ``every`` seconds."""

    def __init__(self, scenario: Autoscale, ramp: RampInput) -> None:
        self.s, self.ramp = scenario, ramp
        self.samples: list[Sample] = []
        self.last_status: dict[str, Any] = {}
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)

    def _run(self) -> None:
        produced_before, at_before = 0, time.time()
        while not self._stop.wait(self.s.cfg.sample_every_s):
            try:
                now = time.time()
                produced = self.ramp.produced
                sample = self._sample(now, (produced - produced_before) / max(1e-6, now - at_before))
                produced_before, at_before = produced, now
                self.samples.append(sample)
                self.s.say(self._line(sample))
                self.s.logs.poll()
            except Exception as exc:  # a slow API server or broker: the next sample tries again
                self.errors.append(f"{type(exc).__name__}: {exc}")

    def _sample(self, now: float, input_rate: float) -> Sample:
        cfg = self.s.cfg
        items: list[dict[str, Any]] = (self.s.kubectl.get("sapp,sts", "-n", self.s.namespace) or {}).get(
            "items"
        ) or []
        app: dict[str, Any] = next((i for i in items if i.get("kind") == "StreamApp"), {})
        status = app.get("status") or {}
        self.last_status = status
        active = str(status.get("activeColor") or "blue")
        sts: dict[str, Any] = next(
            (
                i
                for i in items
                if i.get("kind") == "StatefulSet" and i["metadata"]["name"] == f"{APP}-{active}"
            ),
            {},
        )
        auto = status.get("autoscaling") or {}
        group = ((status.get("colors") or {}).get(active) or {}).get(
            "applicationId"
        ) or f"{self.s.app_id}-{active}"
        lag = lag_max = None
        committed = group_committed(self.s.bootstrap, group, self.s.clicks, cfg.partitions)
        ends = end_offsets(self.s.bootstrap, self.s.clicks)
        if all(o >= 0 for o in committed.values()):
            per = [max(0, ends.get(p, 0) - o) for p, o in committed.items()]
            lag, lag_max = sum(per), max(per)
        t = now - self.ramp.t0
        return Sample(
            t=t,
            target_rate=cfg.rate_at(t),
            input_rate=input_rate,
            replicas=(sts.get("spec") or {}).get("replicas"),
            ready=int((sts.get("status") or {}).get("readyReplicas") or 0) if sts else None,
            current=auto.get("current"),
            desired=auto.get("desired"),
            held_by=auto.get("heldBy"),
            step=auto.get("step"),
            lag=lag,
            lag_max=lag_max,
            reason=str(auto.get("reason") or ""),
        )

    @staticmethod
    def _line(s: Sample) -> str:
        step = f" step {s.step.get('from')}->{s.step.get('to')} {s.step.get('phase')}" if s.step else ""
        return (
            f"[{s.t:6.1f}s] rate {s.target_rate:5.0f}/s (sent {s.input_rate:5.0f}/s) replicas "
            f"{s.replicas}/{s.ready} desired {s.desired} lag {s.lag} (max {s.lag_max})"
            f"{step}{f' held by {s.held_by}' if s.held_by else ''}"
        )

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


def steps_from(samples: list[Sample], t0_wall: float, rate_at: Callable[[float], float]) -> list[Step]:
    """The scaling steps ``status.autoscaling.step`` showed, in order: a step is one
    (from, to, startedAt); it starts at its startedAt (whole seconds; or the sample that first
    showed it, if earlier) and ends at the first sample that no longer shows it."""
    steps: list[Step] = []
    keys: list[tuple[Any, ...]] = []
    for s in samples:
        if s.step:
            key = (s.step.get("from"), s.step.get("to"), s.step.get("startedAt"))
            if not keys or keys[-1] != key or steps[-1].end_t is not None:
                if keys and steps[-1].end_t is None:
                    steps[-1].end_t = s.t
                started = s.t
                if s.step.get("startedAt"):
                    started = min(started, _parse_ts(str(s.step["startedAt"])) - t0_wall)
                steps.append(
                    Step(
                        int(key[0] or 0),
                        int(key[1] or 0),
                        started,
                        None,
                        [],
                        rate_at_start=rate_at(started),
                        reason=str(s.step.get("reason") or s.reason),
                    )
                )
                keys.append(key)
            phase = str(s.step.get("phase"))
            if not steps[-1].phases or steps[-1].phases[-1] != phase:
                steps[-1].phases.append(phase)
        elif steps and steps[-1].end_t is None:
            steps[-1].end_t = s.t
    return steps


def _parse_ts(value: str) -> float:
    return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


def _max_gap(stamps: array[float], start: float, end: float) -> float:
    """The longest time without an append in [start, end] (the edges count as appends)."""
    lo, hi = bisect.bisect_right(stamps, start), bisect.bisect_left(stamps, end)
    inside = [start, *stamps[lo:hi], end]
    return max(b - a for a, b in itertools.pairwise(inside))


def _p99(values: array[float]) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(0.99 * len(ordered)) - 1)]


def read_output(
    bootstrap: str,
    topic: str,
    sent_ms: dict[str, array[int]],
    timeout: float = 600.0,
    *,
    coalesced: bool = False,
) -> tuple[Check, dict[int, array[float]], Iterator[tuple[float, float]]]:
    """Read the sink topic once (read_committed, to its end), checking the counts as they come.

    ``coalesced``: the worker's write cache was on, so a count may skip ahead (the counts in
    between were folded into it); only the end says whether a click was lost. A count n
    still answers the key's n-th click, so its latency is measured from that click.

    Returns the check, each partition's append times (s, in offset order) and the
    (append time, latency) pairs (s) of every output record with a known click."""
    check = Check(records_in=sum(len(v) for v in sent_ms.values()), coalesced=coalesced)
    last: dict[str, int] = collections.defaultdict(int)
    appended: dict[int, array[float]] = collections.defaultdict(lambda: array("d"))
    pairs_at, pairs_lat = array("d"), array("d")
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "fetch.wait.max.ms": 100,
        }
    )
    try:
        partitions = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        consumer.assign([TopicPartition(topic, p, -2) for p in partitions])
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: reached the end of {sorted(eof)} only")
            for msg in consumer.consume(5000, 0.5):
                err = msg.error()
                partition = msg.partition() or 0
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(partition)
                        continue
                    raise RuntimeError(str(err))
                eof.discard(partition)
                at = msg.timestamp()[1] / 1000
                appended[partition].append(at)
                check.records_out += 1
                raw_key, raw_value = msg.key(), msg.value()
                if raw_key is None or raw_value is None:
                    check.problems.append(f"record with key {raw_key!r} value {raw_value!r}")
                    continue
                key, count = raw_key.decode(), int(orjson.loads(raw_value))
                before = last[key]
                if count == before + 1:
                    last[key] = count
                elif count <= before:
                    check.duplicated += 1  # seen before, or behind what was seen
                    check.out_of_order += int(count < before)
                else:
                    check.lost += 0 if coalesced else count - before - 1
                    last[key] = count
                clicks = sent_ms.get(key)
                if clicks is not None and 0 < count <= len(clicks):
                    pairs_at.append(at)
                    pairs_lat.append(at - clicks[count - 1] / 1000)
    finally:
        consumer.close()
    for key, clicks in sent_ms.items():
        n, got = len(clicks), last.get(key, 0)
        if got < n:
            check.lost += n - got
            if len(check.problems) < 50:
                check.problems.append(f"{key}: last count {got} for {n} clicks")
        elif got > n:
            check.duplicated += got - n
            check.problems.append(f"{key}: count {got} for {n} clicks")
    for key in set(last) - set(sent_ms):
        check.problems.append(f"{key}: output for a key never sent")
    return check, dict(appended), zip(pairs_at, pairs_lat, strict=True)


class Autoscale:
    """Run the scenario once in ``namespace`` (which must exist) with the given topics."""

    def __init__(
        self,
        cfg: AutoscaleConfig,
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
        self.app_id = f"autoscale-{uuid.uuid4().hex[:8]}"  # fresh groups and changelogs
        self.kubectl = e2e.Kubectl.local()
        self.logs = e2e.PodLogs(self.kubectl, namespace, APP, workdir)

    def run(self) -> AutoscaleReport:
        started = time.monotonic()
        cfg = self.cfg
        if not cfg.node_image:
            raise ValueError("AutoscaleConfig.node_image: the runtime image to run (dev/image load runtime)")
        e2e.install_crds(self.kubectl)
        self.workdir.mkdir(parents=True, exist_ok=True)
        operator = e2e.PodOperator(
            self.namespace,
            cfg.node_image,
            self.workdir / "operator.log",
            env={"BATON_AUTOSCALING_INTERVAL_SECONDS": f"{cfg.operator_interval_s:g}"},
        )
        self.say(
            f"{cfg.mode}: {APP} on node {node.NAME} from {cfg.node_image}; operator {operator.release}, "
            f"autoscaling pass every {cfg.operator_interval_s:g}s"
        )
        operator.start()
        try:
            return self._scenario(started)
        finally:
            self._keep_logs()
            self.kubectl(
                "delete", "sapp", APP, "-n", self.namespace, "--wait=true", "--timeout=90s", check=False
            )
            operator.kill(signal.SIGTERM)

    def _keep_logs(self) -> None:
        self.logs.close()  # every Pod's log, the ones a scale-in removed included
        with contextlib.suppress(Exception):
            events = self.kubectl(
                "get", "events", "-n", self.namespace, "--sort-by=.lastTimestamp", check=False
            )
            (self.workdir / "events.txt").write_text(events.stdout)

    def _scenario(self, started: float) -> AutoscaleReport:
        cfg = self.cfg
        body = app_body(
            cfg,
            namespace=self.namespace,
            bootstrap=self.bootstrap,
            clicks=self.clicks,
            counts=self.counts,
            app_id=self.app_id,
        )
        self.kubectl.apply(body)
        e2e.wait_app_ready(self.kubectl, self.namespace, APP, cfg.ready_timeout_s)
        self.say(
            f"StreamApp {APP} ({self.app_id}) Ready after {time.monotonic() - started:.0f}s; input starts"
        )
        ramp = RampInput(self.bootstrap, self.clicks, cfg)
        sampler = Sampler(self, ramp)
        ramp.start()
        sampler.start()
        try:
            ramp.join()
            input_s = time.time() - ramp.t0
            sent = ramp.sent()
            self.say(
                f"input done after {input_s:.0f}s: {sum(sent.values()):,} clicks; waiting for the output"
            )
            caught = time.monotonic()
            with contextlib.suppress(TimeoutError):
                wait_for(
                    "the group to commit all the input", self._caught_up, cfg.catch_up_timeout_s, every=2
                )
            catch_up_s = time.monotonic() - caught
            settled = True
            if cfg.settle_to_replicas is not None:
                want = cfg.settle_to_replicas

                def back() -> bool:
                    last = sampler.samples[-1] if sampler.samples else None
                    return last is not None and last.replicas == want and not last.step

                try:
                    wait_for(f"the active color back at {want}", back, cfg.settle_timeout_s, every=1)
                except TimeoutError:
                    settled = False
            else:
                time.sleep(cfg.sample_every_s * 2)
        finally:
            ramp.stop()
            sampler.stop()
        if ramp.failed:
            raise RuntimeError(f"input not delivered: {ramp.failed[:3]}")
        if sampler.errors:
            self.say(f"{len(sampler.errors)} samples failed, e.g. {sampler.errors[0]}")
        self.say("reading the output")
        check, appended, pairs = read_output(
            self.bootstrap, self.counts, ramp.sent_ms, coalesced=cfg.write_cache
        )
        samples = sampler.samples
        overall = self._latencies(samples, ramp.t0, pairs)
        steps = steps_from(samples, ramp.t0, cfg.rate_at)
        for st in steps:
            _pauses(st, appended, ramp.t0, cfg)
        status = sampler.last_status.get("autoscaling") or {}
        return AutoscaleReport(
            config=cfg,
            namespace=self.namespace,
            samples=samples,
            steps=steps,
            check=check,
            scale_events=list(status.get("scaleEvents") or []),
            input_s=input_s,
            catch_up_s=catch_up_s,
            total_s=time.monotonic() - started,
            p99_overall_s=overall,
            settled=settled,
            input_started_at=ramp.t0,
        )

    def _caught_up(self) -> bool:
        status = (e2e.app_object(self.kubectl, self.namespace, APP).get("status")) or {}
        active = str(status.get("activeColor") or "blue")
        group = ((status.get("colors") or {}).get(active) or {}).get(
            "applicationId"
        ) or f"{self.app_id}-{active}"
        return group_committed(self.bootstrap, group, self.clicks, self.cfg.partitions) == end_offsets(
            self.bootstrap, self.clicks
        )

    @staticmethod
    def _latencies(
        samples: list[Sample], t0_wall: float, pairs: Iterator[tuple[float, float]]
    ) -> float | None:
        """Each sample's p99: the outputs appended after the previous sample up to it; and the
        whole run's."""
        edges = [t0_wall + s.t for s in samples]
        buckets: dict[int, array[float]] = collections.defaultdict(lambda: array("d"))
        every = array("d")  # millions on a long run: no list of floats
        for at, latency in pairs:
            every.append(latency)
            i = bisect.bisect_left(edges, at)
            if i < len(samples):
                buckets[i].append(latency)
        for i, s in enumerate(samples):
            bucket = buckets.get(i, array("d"))
            s.outputs = len(bucket)
            s.p99_s = _p99(bucket)
        return _p99(every)


def _pauses(step: Step, appended: dict[int, array[float]], t0_wall: float, cfg: AutoscaleConfig) -> None:
    """The longest output pause of any partition during the step, and over the 20 s before it.

    Only while input arrives: with none, a partition's output stops because there is nothing
    to count."""
    end = step.end_t if step.end_t is not None else step.start_t + cfg.sample_every_s
    if cfg.rate_at(step.start_t) <= 0 or cfg.rate_at(end) <= 0:
        return
    start_w, end_w = t0_wall + step.start_t, t0_wall + end
    gaps = {p: _max_gap(stamps, start_w, end_w) for p, stamps in appended.items()}
    if gaps:
        step.pause_partition, step.longest_pause_s = max(gaps.items(), key=lambda kv: kv[1])
    before = max(0.0, step.start_t - 20)
    if step.start_t - before >= 5 and cfg.rate_at(before) > 0:
        step.baseline_pause_s = max(
            (_max_gap(stamps, t0_wall + before, start_w) for stamps in appended.values()), default=None
        )


def create_topics(bootstrap: str, clicks: str, counts: str, partitions: int) -> None:
    """The input topic, and the sink topic stamped with the broker's append time."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [
        NewTopic(clicks, partitions, 1),
        NewTopic(counts, partitions, 1, config={"message.timestamp.type": "LogAppendTime"}),
    ]
    for fut in admin.create_topics(topics).values():
        fut.result(30)
