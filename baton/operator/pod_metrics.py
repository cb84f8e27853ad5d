"""Scrapes the active color's workers for the autoscaler (the I/O of ``core/autoscaling/pods.py``).

Consumer offsets say what the group processed, not how busy its Pods were: Pods that keep up
look the same at 5 % and at 95 %. Each pass of an autoscaled app GETs ``/metrics`` of every
Ready Pod of the active color (``http://<status.podIP>:<spec.worker.metricsPort>``, the port
the supervisor of a multi-process Pod serves all its processes on) and keeps the series the
decision needs. The GETs run at once with a short timeout: a pass must not wait on a Pod
that hangs, and one that does not answer only costs the pass its Pod figures (the reconciler
falls back to the offsets-only sample).
"""

from __future__ import annotations

import logging
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from baton.operator.core.autoscaling import PodReading

log = logging.getLogger(__name__)

TIMEOUT_S = 1.0
MAX_PARALLEL = 8
BUSY = "baton_busy_seconds_total"
CONSUMED = "baton_records_consumed_total"
LATENCY_BUCKET = "baton_e2e_latency_seconds_bucket"
# a worker process serves only these (``health.serve``); a multi-process Pod's supervisor all
QUERY = urllib.parse.urlencode([("name[]", name) for name in (BUSY, CONSUMED, LATENCY_BUCKET)])


def _series(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(labels.items()) if k != "le")


def parse(pod: str, uid: str, at: float, text: str) -> PodReading:
    """One Pod's exposition (a worker's, or a supervisor's with a ``process`` label) as a reading."""
    busy: dict[str, float] = {}
    consumed: dict[str, float] = {}
    buckets: dict[tuple[str, float], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == BUSY:
                busy[s.labels.get("process", "")] = s.value
            elif s.name == CONSUMED:
                consumed[_series(s.labels)] = s.value
            elif s.name == LATENCY_BUCKET:
                le = float(s.labels["le"])  # "+Inf" -> inf
                buckets[(_series(s.labels), le)] = s.value
    return PodReading(pod, uid, at, busy, consumed, buckets)


def ready_pods(pods: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Pods that serve: Ready and not being deleted (a terminating Pod's figures are leaving)."""
    out = []
    for pod in pods:
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        conditions = (pod.get("status") or {}).get("conditions") or []
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            out.append(pod)
    return out


def _get(url: str, timeout: float) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as resp:
        return str(resp.read().decode())


def scrape(
    pods: list[dict[str, Any]],
    port: int,
    clock: Callable[[], float],
    timeout: float = TIMEOUT_S,
) -> tuple[dict[str, PodReading], bool]:
    """Readings of the Ready ``pods`` that answered, by Pod name, and whether all of them did.

    ``clock()`` stamps each reading when its answer arrives (rates divide by the time between
    two readings of one Pod)."""
    targets = ready_pods(pods)
    if not targets:
        return {}, False

    def one(pod: dict[str, Any]) -> PodReading | None:
        meta = pod.get("metadata") or {}
        name, uid = str(meta.get("name")), str(meta.get("uid") or "")
        ip = (pod.get("status") or {}).get("podIP")
        if not ip:
            return None
        host = f"[{ip}]" if ":" in ip else ip
        try:
            text = _get(f"http://{host}:{port}/metrics?{QUERY}", timeout)
            return parse(name, uid, clock(), text)
        except Exception as exc:  # a Pod that does not answer, or answers garbage: no figures
            log.debug("no metrics from a pod", extra={"pod": name, "error": str(exc)})
            return None

    with ThreadPoolExecutor(max_workers=min(MAX_PARALLEL, len(targets)), thread_name_prefix="scrape") as pool:
        results = list(pool.map(one, targets))
    readings = {r.pod: r for r in results if r is not None}
    return readings, len(readings) == len(targets)
