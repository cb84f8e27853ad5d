"""How bench/throughput.py times a run: a processed-records counter polled every quarter second.

Shared by every row of the bench: Baton's workers (their ``baton_records_consumed_total``),
Kafka Streams (its stream thread's ``process-total``, served by the peer's metrics endpoint)
and the plain loops (which time themselves). CPU is read from ``/proc`` at the same polls.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from pathlib import Path

from batondev import procs

POLL_S = 0.25  # how often a run's processed-records counter is read


def cpu_sample(when: str, broker: int | None, app: float) -> dict[str, float]:
    """CPU seconds used so far by the local stack's broker, the whole machine and the app's processes."""
    if broker is None:  # a broker that is not the local stack's: nothing to read
        return {}
    return {
        f"broker_{when}": procs.cpu_seconds(broker),
        f"busy_{when}": procs.busy_seconds(),
        f"app_{when}": app,
    }


def cores(cpu: dict[str, float], seconds: float, events: float) -> dict[str, float]:
    """Cores in use over the measured span (the machine's, the broker's, the app's) and the app's CPU per record.

    A row's records/s is ``app_cores`` ÷ ``app_us_per_record``, so a second process's
    ratio splits into the cores the app got and what a record cost it: whether a shortfall
    is the machine's (cores the broker and the rest took) or the app's (a record cost more).
    """
    if "broker_last" not in cpu or "broker_first" not in cpu:
        return {}
    app = cpu["app_last"] - cpu["app_first"]
    return {
        "busy_cores": round((cpu["busy_last"] - cpu["busy_first"]) / seconds, 2),
        "broker_cores": round((cpu["broker_last"] - cpu["broker_first"]) / seconds, 2),
        "app_cores": round(app / seconds, 2),
        "app_us_per_record": round(app / events * 1e6, 2),
    }


def peak_rss_mb(pids: list[int]) -> float:
    """The processes' peak resident memory (``VmHWM``), summed, in MiB; 0 for a process gone."""
    total = 0
    for pid in pids:
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])  # kB
    return round(total / 1024, 1)


def http_metric(port: int, name: str) -> float:
    """The sum of ``name``'s samples at ``http://127.0.0.1:port/metrics``; 0 while nothing listens."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
            body = resp.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return 0.0
    total = 0.0
    for line in body.splitlines():
        if line.startswith(name) and line[len(name)] in " {":
            total += float(line.rsplit(" ", 1)[1])
    return total


class Span:
    """A run's measured span: from the first poll that sees a processed record to the poll that
    sees them all, with the CPU of the app's processes, the broker and the machine at both.

    ``target`` is the counter's value once every record has gone through the whole topology
    (input records, plus the records read back from a repartition topic, plus a table's rows
    where the system counts them). The rate is of *input* records: the counter's progress over
    the span, scaled by ``events / target``, so the records a system had processed before the
    first poll saw any are counted neither in the time nor in the records.
    """

    def __init__(self, target: int, events: int, broker: int | None) -> None:
        self.target, self.events, self.broker = target, events, broker
        self.first = self.last = 0.0
        self.done_first = self.done_last = 0.0
        self.cpu: dict[str, float] = {}

    def poll(self, done: float, app_cpu: float) -> bool:
        """Record one poll's counter and the app's CPU seconds; true once every record is processed."""
        now = time.monotonic()
        if done <= 0:
            return False
        when = "last" if self.first else "first"
        if not self.first:
            self.first, self.done_first = now, done
        self.last, self.done_last = now, done
        self.cpu.update(cpu_sample(when, self.broker, app_cpu))
        return done >= self.target

    def result(self) -> dict[str, float]:
        seconds = max(self.last - self.first, POLL_S)  # a run within one poll is known only to that
        measured = (self.done_last - self.done_first) * self.events / self.target
        if measured <= 0:  # every record was processed before the first poll saw one
            measured = self.events
        return {
            "seconds": round(seconds, 2),
            "measured_records": round(measured),
            "records_per_second": round(measured / seconds),
            **cores(self.cpu, seconds, measured),
        }
