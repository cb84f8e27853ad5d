"""Blue-green flips under steady input: pause per flip, the largest output gap, end-to-end latency.

    python bench/flip.py [--bootstrap 127.0.0.1:29092] [--flips 10] [--rate 2000] [--json PATH]

One worker per color runs the click counter (write cache off, exactly-once) on the real
broker; `baton.control.coordinator.flip` flips back and forth while input arrives at a
fixed rate. A reader tails the sink topic ``read_committed`` and notes when each record
becomes visible. Reported:

* pause per flip: prepare written -> commit written (both colors paused in between);
* the largest gap between two visible output records, overall and around flips;
* end-to-end latency (visible - produced) percentiles and the share under 1 s;
* exactness: the output must be 1..n per user, as one uninterrupted run would give.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

import orjson
from confluent_kafka import Consumer, KafkaError
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from baton.control.channel import control_topic
from baton.control.coordinator import FlipResult, flip
from baton.control.messages import Color
from baton.testing import SteadyInput, WorkerProcess, wait_for

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = str(REPO / "examples" / "click_counter.py")


class OutputTail:
    """Notes (visible_at_ms, produced_ms, key, count) of every committed output record."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.records: list[tuple[float, int, str, int]] = []
        self._stop = threading.Event()
        self._consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"flip-bench-{uuid.uuid4().hex}",
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "fetch.wait.max.ms": 10,
            }
        )
        self._consumer.subscribe([topic])
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for msg in self._consumer.consume(1000, 0.05):
                err = msg.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        raise RuntimeError(str(err))
                    continue
                now = time.time() * 1000
                key, value = msg.key(), msg.value()
                assert key is not None and value is not None
                self.records.append((now, msg.timestamp()[1], key.decode(), int(orjson.loads(value))))
        self._consumer.close()

    def start(self) -> OutputTail:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]


def run(bootstrap: str, flips: int, rate: int, spacing: float) -> dict[str, object]:
    base = f"flipbench-{uuid.uuid4().hex[:6]}"
    clicks, counts = f"{base}-clicks", f"{base}-counts"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(clicks, 8, 1), NewTopic(counts, 8, 1)]).values():
        fut.result(30)
    results: list[FlipResult] = []
    flip_windows: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="baton-flipbench-") as tmpd:
        tmp = Path(tmpd)
        workers = []
        for color in ("blue", "green"):
            env = {
                "CLICKS_TOPIC": clicks,
                "COUNTS_TOPIC": counts,
                "BATON_COLOR": color,
                "BATON_CONTROL_TOPIC": control_topic(base),
            }
            workers.append(
                WorkerProcess(
                    EXAMPLE,
                    bootstrap=bootstrap,
                    application_id=f"{base}-{color}",
                    state_dir=tmp / color,
                    log_path=tmp / f"{color}.log",
                    instance_id=f"{base}-{color}-0",
                    env=env,
                    extra_args=["--no-write-cache"],
                ).start()
            )
        tail = OutputTail(bootstrap, counts).start()
        try:
            for w in workers:
                w.wait_ready(120)
            with SteadyInput(bootstrap, clicks, rate=rate) as steady:
                time.sleep(spacing)
                for i in range(flips):
                    to: Color = "green" if i % 2 == 0 else "blue"
                    started = time.time() * 1000
                    result = flip(bootstrap, base, to, deadline_s=15)
                    flip_windows.append((started, time.time() * 1000))
                    results.append(result)
                    time.sleep(spacing)
            sent = steady.sent
            wait_for("final counts", lambda: _latest(tail) == dict(sent), 180, every=0.5)
        finally:
            tail.stop()
            for w in workers:
                w.stop()
    admin.delete_topics([clicks, counts])
    return summarize(results, flip_windows, tail.records, sent)


def _latest(tail: OutputTail) -> dict[str, int]:
    out: dict[str, int] = {}
    for _seen, _ts, key, count in list(tail.records):
        out[key] = count
    return out


def summarize(
    results: list[FlipResult],
    windows: list[tuple[float, float]],
    records: list[tuple[float, int, str, int]],
    sent: collections.Counter[str],
) -> dict[str, object]:
    per_key: dict[str, list[int]] = collections.defaultdict(list)
    for _seen, _ts, key, count in records:
        per_key[key].append(count)
    exact = all(per_key[u] == list(range(1, n + 1)) for u, n in sent.items()) and set(per_key) == set(sent)
    seen = sorted(r[0] for r in records)
    gaps = [(b - a, a) for a, b in itertools.pairwise(seen)]
    around = [g for g, at in gaps if any(s - 1000 <= at <= e + 2000 for s, e in windows)]
    latencies = [r[0] - r[1] for r in records]
    pauses = [r.pause_ms for r in results if r.committed]
    return {
        "flips": len(results),
        "committed": sum(r.committed for r in results),
        "pause_ms_p50": round(statistics.median(pauses), 1) if pauses else None,
        "pause_ms_p99": round(percentile(pauses, 99), 1) if pauses else None,
        "pause_ms_max": round(max(pauses), 1) if pauses else None,
        "largest_gap_ms": round(max(g for g, _ in gaps), 1) if gaps else None,
        "largest_gap_ms_around_flips": round(max(around), 1) if around else None,
        "records": len(records),
        "latency_ms_p50": round(percentile(latencies, 50), 1),
        "latency_ms_p99": round(percentile(latencies, 99), 1),
        "latency_ms_p9999": round(percentile(latencies, 99.99), 1),
        "share_under_1s": round(sum(1 for v in latencies if v < 1000) / max(1, len(latencies)), 5),
        "exact": exact,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--bootstrap", default="127.0.0.1:29092")
    parser.add_argument("--flips", type=int, default=10)
    parser.add_argument("--rate", type=int, default=2000, help="input records per second")
    parser.add_argument("--spacing", type=float, default=3.0, help="seconds between flips")
    parser.add_argument("--json", type=Path, default=REPO / "bench" / "results" / "flip.json")
    args = parser.parse_args()
    summary = run(args.bootstrap, args.flips, args.rate, args.spacing)
    width = max(len(k) for k in summary)
    print(f"flip benchmark: {args.flips} flips, {args.rate} records/s, 1 worker per color, exactly-once")
    for key, value in summary.items():
        print(f"  {key:<{width}}  {value}")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(
        json.dumps({"params": vars(args) | {"json": str(args.json)}, "summary": summary}, indent=2)
    )
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
