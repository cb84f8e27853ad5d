"""Processes per pod: what each child is (pure plan) and the pod's merged metrics."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from baton.worker.config import WorkerConfig
from baton.worker.processes.join import DIRECTORY, JoinBarrier
from baton.worker.processes.plan import config_env, plan
from baton.worker.processes.scrape import merge
from baton.worker.processes.supervisor import Supervisor

pytestmark = pytest.mark.unit


def _config(**changes: object) -> WorkerConfig:
    base: dict[str, object] = {
        "topology": "examples/click_counter.py",
        "bootstrap_servers": "kafka:9092",
        "application_id": "clicks",
        "state_dir": Path("/var/lib/baton"),
        "processes": 3,
        "instance_id": "clicks-blue-0",
        "metrics_port": 8080,
        "kafka_config": {
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "u",
            "sasl.password": "p",
        },
        "write_cache": False,
    }
    return WorkerConfig(**(base | changes))  # type: ignore[arg-type]


def test_process_zero_keeps_the_pods_identity_and_the_others_get_their_own() -> None:
    slots = plan(_config(), "clicks-blue-0", [5001, 5002, 5003])
    got = [(s.config.state_dir, s.config.instance_id, s.config.metrics_port) for s in slots]
    assert got == [
        (Path("/var/lib/baton"), "clicks-blue-0", 5001),
        (Path("/var/lib/baton/processes/1"), "clicks-blue-0-1", 5002),
        (Path("/var/lib/baton/processes/2"), "clicks-blue-0-2", 5003),
    ]
    assert {s.config.host for s in slots} == {"clicks-blue-0"}  # one pod: standbys avoid it
    assert {s.config.processes for s in slots} == {1}
    assert slots[1].config.application_id == "clicks" and slots[1].config.write_cache is False


def test_without_an_instance_id_children_keep_none_and_an_explicit_host_wins() -> None:
    slots = plan(_config(instance_id=None, host="node-a"), "ignored", [1, 2, 3])
    assert [s.config.instance_id for s in slots] == [None, None, None]
    assert {s.config.host for s in slots} == {"node-a"}


def test_one_port_per_process() -> None:
    with pytest.raises(ValueError, match="3 processes need 3 ports"):
        plan(_config(), "pod", [1, 2])


def test_a_childs_environment_makes_the_same_config(monkeypatch: pytest.MonkeyPatch) -> None:
    child = plan(_config(commit_interval_ms=250), "pod", [1, 2, 3])[2].config
    for name, value in config_env(child).items():
        monkeypatch.setenv(name, value)
    assert WorkerConfig() == child  # type: ignore[call-arg]


def test_a_supervisor_runs_two_processes_or_more() -> None:
    with pytest.raises(ValueError, match="two processes or more"):
        Supervisor(_config(processes=1))


def _exposition(consumed: float, active: float, commit: float) -> str:
    r = CollectorRegistry()
    Counter("baton_records_consumed", "Input records", ["partition"], registry=r).labels("0").inc(consumed)
    Gauge("baton_tasks", "Tasks", ["state"], registry=r).labels("active").set(active)
    Histogram("baton_commit_latency_seconds", "Commit", registry=r, buckets=(0.1, 1)).observe(commit)
    return generate_latest(r).decode()


def test_merged_metrics_have_each_family_once_and_each_series_per_process() -> None:
    merged = merge([("0", _exposition(5, 2, 0.05)), ("1", _exposition(7, 3, 0.5))])
    r = CollectorRegistry()

    class Fixed:
        def collect(self) -> list[object]:
            return list(merged)

    r.register(Fixed())  # type: ignore[arg-type]
    text = generate_latest(r).decode()
    assert text.count("# TYPE baton_records_consumed_total counter") == 1
    families = {f.name: f for f in text_string_to_metric_families(text)}
    consumed = {
        s.labels["process"]: s.value
        for s in families["baton_records_consumed"].samples
        if s.name.endswith("_total")
    }
    assert consumed == {"0": 5.0, "1": 7.0}
    tasks = {s.labels["process"]: s.value for s in families["baton_tasks"].samples}
    assert sum(tasks.values()) == 5.0
    buckets = {
        (s.labels["process"], s.labels["le"]): s.value
        for s in families["baton_commit_latency_seconds"].samples
        if s.name.endswith("_bucket")
    }
    assert buckets[("0", "0.1")] == 1.0 and buckets[("1", "0.1")] == 0.0 and buckets[("1", "1.0")] == 1.0


def test_the_pods_processes_join_together_and_none_waits_for_a_missing_one(tmp_path: Path) -> None:
    (tmp_path / DIRECTORY / "7").parent.mkdir()
    (tmp_path / DIRECTORY / "7").touch()  # left by an earlier start of the pod: not a party now
    directory = JoinBarrier.prepare(tmp_path)
    assert list(directory.iterdir()) == []
    barriers = [JoinBarrier.from_env(JoinBarrier(directory, 3, i).env()) for i in range(3)]
    assert barriers == [JoinBarrier(directory, 3, i) for i in range(3)]
    results: dict[int, bool] = {}
    threads = [
        threading.Thread(target=lambda b=b: results.__setitem__(b.index, b.wait(timeout=30)))
        for b in barriers[:2]
        if b is not None
    ]
    for t in threads:
        t.start()
    time.sleep(0.2)
    assert results == {}  # the third is not there yet: the first two wait
    assert barriers[2] is not None and barriers[2].wait(timeout=30)
    for t in threads:
        t.join(30)
    assert results == {0: True, 1: True}
    # a process whose sibling never comes joins alone after the timeout
    alone = JoinBarrier(JoinBarrier.prepare(tmp_path), 2, 0)
    started = time.monotonic()
    assert not alone.wait(timeout=0.3)
    assert time.monotonic() - started >= 0.3
    assert JoinBarrier.from_env({}) is None  # a worker no supervisor started
