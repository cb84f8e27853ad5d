"""The operator's scrape of the workers' /metrics: the names it reads are the ones the worker
exports (its real registry, served by its real HTTP server), a multi-process Pod's series are
kept per process, and a Pod that does not answer makes the scrape incomplete."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest
from prometheus_client import generate_latest

from baton.operator.core.autoscaling import pod_sample
from baton.operator.pod_metrics import BUSY, CONSUMED, LATENCY_BUCKET, QUERY, parse, ready_pods, scrape
from baton.worker.processes.scrape import merge
from baton.worker.runtime import health
from baton.worker.runtime.metrics import Metrics

pytestmark = pytest.mark.unit


def _worker(busy: float, consumed: int, latencies: list[float]) -> Metrics:
    m = Metrics("app-blue")
    m.busy.inc(busy)
    m.records_in.labels("in", "0").inc(consumed)
    for x in latencies:
        m.e2e_latency.labels("0_0").observe(x)
    return m


def test_the_reading_has_the_workers_own_series() -> None:
    text = generate_latest(_worker(2.5, 7, [0.3, 0.3, 7.0]).registry).decode()
    r = parse("app-blue-0", "u", 10.0, text)
    assert r.busy_seconds == {"": 2.5} and r.processes == 1
    assert sum(r.consumed.values()) == 7
    assert r.latency_buckets[("task=0_0", 0.5)] == 2 and r.latency_buckets[("task=0_0", math.inf)] == 3


def test_a_supervisors_merged_exposition_keeps_each_process() -> None:
    a = generate_latest(_worker(4.0, 10, []).registry).decode()
    b = generate_latest(_worker(1.0, 5, []).registry).decode()
    r = parse("app-blue-0", "u", 10.0, _exposition(merge([("0", a), ("1", b)])))
    assert r.busy_seconds == {"0": 4.0, "1": 1.0} and r.processes == 2
    assert sorted(r.consumed.values()) == [5.0, 10.0]


def _exposition(families: list[Any]) -> str:
    from prometheus_client import CollectorRegistry

    class Fixed:
        def collect(self) -> list[Any]:
            return families

    registry = CollectorRegistry()
    registry.register(Fixed())
    return generate_latest(registry).decode()


def _pod(name: str, ip: str | None, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"uid-{name}"}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T00:00:00Z"
    status: dict[str, Any] = {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if ip:
        status["podIP"] = ip
    return {"metadata": meta, "status": status}


def test_scrape_reads_every_ready_pod_and_says_when_one_did_not_answer() -> None:
    worker = _worker(0.0, 0, [])
    server = health.serve(0, worker.registry, lambda: True, lambda: True)
    port = server.server_address[1]
    clock = itertools.count(100.0, 10.0)
    try:
        pods = [
            _pod("p0", "127.0.0.1"),
            _pod("p1", "127.0.0.1", ready=False),
            _pod("p2", "127.0.0.1", deleting=True),
        ]
        assert [p["metadata"]["name"] for p in ready_pods(pods)] == ["p0"]
        first, complete = scrape(pods, port, lambda: float(next(clock)))
        assert complete and set(first) == {"p0"}
        worker.busy.inc(4.0)  # the loop worked 4 of the 10 s between the scrapes
        worker.records_in.labels("in", "0").inc(300)
        second, complete = scrape(pods, port, lambda: float(next(clock)))
        assert complete
        s = pod_sample(first["p0"], second["p0"])
        assert s is not None and s.busy == pytest.approx(0.4) and s.processed_rate == pytest.approx(30)
        # a Ready Pod without an IP, or one nothing listens for: the readings of the others, incomplete
        readings, complete = scrape([*pods, _pod("p3", None)], port, lambda: 0.0)
        assert set(readings) == {"p0"} and not complete
        readings, complete = scrape([_pod("p0", "127.0.0.1")], _free_port(), lambda: 0.0, timeout=0.5)
        assert readings == {} and not complete
        assert scrape([], port, lambda: 0.0) == ({}, False)
    finally:
        server.shutdown()
        server.server_close()


def _sample_names(port: int, query: str) -> set[str]:
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics{query}", timeout=5) as reply:
        text = reply.read().decode()
    return {s.name for family in text_string_to_metric_families(text) for s in family.samples}


def test_a_worker_serves_only_the_metrics_a_scrape_names_and_a_supervisor_all() -> None:
    worker = _worker(1.0, 5, [0.3])
    servers = [
        health.serve(0, worker.registry, lambda: True, lambda: True),
        health.serve(0, worker.registry, lambda: True, lambda: True, by_name=False),
    ]
    worker_port, supervisor_port = (s.server_address[1] for s in servers)
    try:
        everything = _sample_names(worker_port, "")
        assert {BUSY, CONSUMED, LATENCY_BUCKET} < everything and "baton_ready" in everything
        assert _sample_names(worker_port, f"?{QUERY}") == {BUSY, CONSUMED, LATENCY_BUCKET}
        assert _sample_names(worker_port, "?name[]=baton_ready") == {"baton_ready"}
        assert _sample_names(supervisor_port, f"?{QUERY}") == everything
    finally:
        for server in servers:
            server.shutdown()
            server.server_close()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
