"""Helpers to test topologies against a real broker: worker subprocesses, producing, reading back.

Used by Baton's own integration tests and benchmarks, and usable by applications that
want the same kind of test. Nothing here fakes Kafka: workers are real processes
running ``baton run`` and records go through the real broker.
"""

from __future__ import annotations

import collections
import os
import random
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import orjson
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from baton.worker.runtime.clients import FETCH_DEFAULTS

T = TypeVar("T")

_LAUNCH = "import sys; from baton.cli import main; sys.argv[0] = 'baton'; main()"


@dataclass
class Record:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp: int
    headers: dict[str, bytes]


class WorkerProcess:
    """One ``baton run`` subprocess; its JSON log lines go to ``log_path``."""

    def __init__(
        self,
        topology: str | Path,
        *,
        bootstrap: str,
        application_id: str,
        state_dir: Path,
        log_path: Path,
        guarantee: str = "exactly_once_v2",
        instance_id: str | None = None,
        extra_args: Iterable[str] = (),
        env: dict[str, str] | None = None,
        processes: int = 1,
        prelude: str = "",
    ) -> None:
        """``prelude``: Python run in the worker's interpreter before ``baton run`` starts, for a
        test that must widen a window of the real code (a slower commit, say) to land in it."""
        self.processes = processes  # > 1: a supervisor, whose port serves all its processes
        self.args = [
            sys.executable,
            "-c",
            f"{prelude}\n{_LAUNCH}" if prelude else _LAUNCH,
            "run",
            str(topology),
            "--bootstrap-servers",
            bootstrap,
            "--application-id",
            application_id,
            "--state-dir",
            str(state_dir),
            "--processing-guarantee",
            guarantee,
            "--metrics-port",
            "0",
            *extra_args,
        ]
        if instance_id:
            self.args += ["--instance-id", instance_id]
        if processes > 1:
            self.args += ["--processes", str(processes)]
        self.log_path = log_path
        self.env = {**os.environ, **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self._log_offset = 0
        self._known_ports: dict[str, list[int]] = {}  # logger -> ports it listens on, this run

    def start(self) -> WorkerProcess:
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._known_ports = {}
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=log, stderr=subprocess.STDOUT, env=self.env)
        return self

    def kill(self, sig: int = signal.SIGKILL) -> None:
        assert self.proc is not None
        self.proc.send_signal(sig)

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait; returns the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout)

    def wait(self, timeout: float) -> int:
        assert self.proc is not None
        return self.proc.wait(timeout)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def logs(self, current_run_only: bool = True) -> list[dict[str, object]]:
        """Parsed JSON log lines (of the current run by default); other lines are skipped."""
        if not self.log_path.exists():
            return []
        data = self.log_path.read_bytes()[self._log_offset if current_run_only else 0 :]
        out = []
        for line in data.splitlines():
            if line.startswith(b"{"):
                try:
                    out.append(orjson.loads(line))
                except orjson.JSONDecodeError:
                    continue
        return out

    def port(self, timeout: float = 30.0) -> int:
        """The port of /metrics, /healthz, /readyz: the supervisor's when it runs several processes."""
        logger = "baton.worker.processes.supervisor" if self.processes > 1 else "baton.worker"
        return self._ports(logger, 1, timeout)[0]

    def process_ports(self, timeout: float = 30.0) -> list[int]:
        """Each worker process's own port (the one process's, when there is no supervisor), as
        first announced in this run: a process its supervisor restarts is not followed."""
        return self._ports("baton.worker", self.processes, timeout)

    def _ports(self, logger: str, count: int, timeout: float) -> list[int]:
        """The ports ``logger`` said it listens on in this run, once it has said so ``count`` times.

        Kept per run: a bench polls every quarter second, and reading a growing log each time
        costs the machine the workers run on."""
        if len(known := self._known_ports.get(logger, [])) >= count:
            return known

        def listening() -> list[int] | None:
            ports = [
                x["port"]
                for x in self.logs()
                if x.get("msg") == "http listening"
                and x.get("logger") == logger
                and isinstance(x["port"], int)
            ]
            return ports if len(ports) >= count else None

        self._known_ports[logger] = wait_for(f"{self.log_path.name}: no http port", listening, timeout)
        return self._known_ports[logger]

    def http(self, path: str, port: int | None = None) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port or self.port()}{path}", timeout=5) as resp:
                return resp.status, resp.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def wait_ready(self, timeout: float = 60.0) -> None:
        wait_for(
            f"{self.log_path.name} not ready", lambda: self.alive and self.http("/readyz")[0] == 200, timeout
        )

    def restored(self) -> int:
        """Records restored in the current run, from the 'store restored' log lines."""
        total = 0
        for line in self.logs():
            if line.get("msg") == "store restored":
                value = line["restored"]
                assert isinstance(value, int)
                total += value
        return total

    def metric(self, name: str, *, from_processes: bool = False) -> float:
        """Sum of a Prometheus metric's samples (all label sets).

        ``from_processes`` reads each worker process's own endpoint instead of the pod's one
        (the supervisor's, which parses and merges all of theirs on every scrape): a bench
        that polls several times a second then costs each process what it costs one
        process alone, and the supervisor nothing."""
        ports = self.process_ports() if from_processes else [self.port()]
        total = 0.0
        # that sample name only (a bench polls it while the worker works); ``name`` may be
        # followed by a label selector, ``baton_dlq_records_total{stage="produce"}``
        query = urllib.parse.urlencode({"name[]": name.split("{", 1)[0]})
        for port in ports:
            _status, body = self.http(f"/metrics?{query}", port)
            for line in body.splitlines():
                if line.startswith(name) and (line[len(name)] in " {"):
                    total += float(line.rsplit(" ", 1)[1])
        return total


def wait_for(
    what: str,
    probe: Callable[[], T | None],
    timeout: float = 60.0,
    every: float = 0.25,
    detail: Callable[[], str] | None = None,
) -> T:
    """Poll ``probe`` until it returns something truthy and return that.

    On timeout raise ``TimeoutError`` naming ``what`` and the last value, plus ``detail()``
    (a log tail, say) so a failed wait says why without a rerun."""
    deadline = time.monotonic() + timeout
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            extra = f"\n{detail()}" if detail is not None else ""
            raise TimeoutError(f"timed out after {timeout:g}s waiting for {what} (last: {last!r}){extra}")
        time.sleep(every)


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None] | tuple[bytes | None, bytes | None, int]],
) -> int:
    """Produce (key, value[, timestamp_ms]) records with the Java partitioner; returns how many.

    A timestamp of 0 (or none) means "now" to librdkafka, not the epoch.
    """
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "partitioner": "murmur2_random",
            "linger.ms": 20,
            "enable.idempotence": True,
        }
    )
    count = 0
    for record in records:
        timestamp = record[2] if len(record) == 3 else 0
        while True:
            try:
                producer.produce(topic, record[1], record[0], timestamp=timestamp)
                break
            except BufferError:
                producer.poll(0.1)
        count += 1
    remaining = producer.flush(60)
    assert remaining == 0, f"{remaining} records not delivered"
    return count


def read_all(
    bootstrap: str,
    topic: str,
    *,
    committed_only: bool = True,
    start: dict[int, int] | None = None,
    timeout: float = 60.0,
) -> list[Record]:
    """Every record of ``topic`` up to its current end, in offset order per partition."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "isolation.level": "read_committed" if committed_only else "read_uncommitted",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            **FETCH_DEFAULTS,  # reads whole topics: librdkafka's 1 s fetch backoff caps it as it capped the worker
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        partitions = sorted(meta.partitions)
        consumer.assign([TopicPartition(topic, p, (start or {}).get(p, -2)) for p in partitions])
        out: list[Record] = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic}: reached the end of {sorted(eof)} only")
            for msg in consumer.consume(1000, 0.5):
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        eof.add(msg.partition() or 0)
                        continue
                    raise RuntimeError(str(err))
                eof.discard(msg.partition() or 0)
                out.append(
                    Record(
                        msg.key(),
                        msg.value(),
                        msg.partition() or 0,
                        msg.offset() or 0,
                        msg.timestamp()[1],
                        _headers(msg.headers()),
                    )
                )
        return out
    finally:
        consumer.close()


def group_committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    """The group's committed offset of each partition of ``topic`` (negative: none yet)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex}",
            "isolation.level": "read_committed",
        }
    )
    try:
        meta = consumer.list_topics(topic, timeout=10).topics[topic]
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in meta.partitions
        }
    finally:
        consumer.close()


def latest_by_key(records: Iterable[Record]) -> dict[bytes | None, bytes | None]:
    out: dict[bytes | None, bytes | None] = {}
    for r in records:
        out[r.key] = r.value
    return out


def _headers(raw: object) -> dict[str, bytes]:
    items = raw.items() if isinstance(raw, dict) else (raw or [])
    assert isinstance(items, Iterable)
    return {k: v.encode() if isinstance(v, str) else v for k, v in items if v is not None}


class SteadyInput:
    """Produces click events at a fixed rate in a background thread and counts them per user.

    Records carry the producer's wall-clock timestamp, so a reader of the output can measure
    end-to-end latency; the JSON ``timestamp`` field counts up from a fixed start, so the
    input is the same on every run with the same seed.
    """

    def __init__(
        self, bootstrap: str, topic: str, rate: int, users: list[str] | None = None, seed: int = 11
    ) -> None:
        self.bootstrap, self.topic, self.rate, self.seed = bootstrap, topic, rate, seed
        self.users = users or [f"user-{i:02d}" for i in range(24)]
        self.sent: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "partitioner": "murmur2_random",
                "enable.idempotence": True,
                "linger.ms": 2,
            }
        )
        rng = random.Random(self.seed)
        ts = 1_678_886_400
        interval = 1.0 / self.rate
        next_at = time.monotonic()
        while not self._stop.is_set():
            user = rng.choice(self.users)
            while True:
                try:
                    producer.produce(
                        self.topic, orjson.dumps({"user_id": user, "timestamp": ts}), user.encode()
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
            self.sent[user] += 1
            ts += 1
            next_at += interval
            producer.poll(0)
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
        remaining = producer.flush(30)
        assert remaining == 0, f"{remaining} input records not delivered"

    def __enter__(self) -> SteadyInput:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(60)
