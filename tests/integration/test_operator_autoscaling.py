"""spec.autoscaling against the real API server and Kafka: the operator samples the active
color's group offsets each pass, holds scaling during a deploy, and scales the active
StatefulSet out when the input outruns what the group commits; with the workers' own
/metrics (their busy fraction) it scales in while the Pods keep up with the input.

The harness plays kubelet. In the first test no workers run: the test is the "slow
consumer", committing the active color's group offsets at less than the input rate, so its
lag grows past lagRecords. In the second, real workers run as local processes, one per
active Pod, and the test plays the Pod network: each Pod's status.podIP is a loopback
address of its own (127.0.0.2, 127.0.0.3) where the Pod's metrics port answers with its
worker's /metrics, as the operator would reach a Pod in a cluster. Each worker runs under its
Pod's name and follows the app's control topic, as in a Pod, so the scale-in drains the Pod
that goes (its tasks move, warm, to the one that stays) before the StatefulSet shrinks.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from batondev.paths import CLICK_COUNTER
from confluent_kafka import Consumer, Producer, TopicPartition

from baton.testing import SteadyInput, WorkerProcess, wait_for
from tests.support.click_counters import wait_for_changelog_past
from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    get_json,
    mark_pods_ready,
    patch_pod_status,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4
RECOVERY_LAG = 20  # the workers' acceptable.recovery.lag in the scale-in test


class SlowConsumer:
    """Produces ``produce`` records per partition every tick and commits ``commit`` of them."""

    def __init__(self, bootstrap: str, topic: str, group: str, produce: int = 50, commit: int = 20) -> None:
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.produce, self.commit = produce, commit
        self.running = False
        self.stop = threading.Event()
        self.positions = [0] * PARTITIONS
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False}
        )
        self._commit()  # the group has offsets from the start (nothing processed yet)

    def _commit(self) -> None:
        offsets = [TopicPartition(self.topic, p, o) for p, o in enumerate(self.positions)]
        self.consumer.commit(offsets=offsets, asynchronous=False)

    def start(self) -> None:
        self.thread.start()

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, "linger.ms": 5})
        while not self.stop.wait(0.5):
            for p in range(PARTITIONS):
                for i in range(self.produce):
                    producer.produce(self.topic, value=str(i).encode(), partition=p)
            producer.flush(10)
            self.positions = [o + self.commit for o in self.positions]
            self._commit()

    def close(self) -> None:
        self.stop.set()
        if self.thread.is_alive():
            self.thread.join(10)
        self.consumer.close()


def test_autoscaling_scales_the_active_color_out_and_a_deploy_holds_it(  # noqa: PLR0917 (fixtures)
    operator: Callable[..., OperatorProcess],
    kubectl: KubectlFn,
    namespace: str,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    unique_name: str,
) -> None:
    app_id = unique_name
    source = new_topic(partitions=PARTITIONS)
    load = SlowConsumer(kafka_bootstrap, source, f"{app_id}-blue")
    try:
        operator(env={"BATON_AUTOSCALING_INTERVAL_SECONDS": "1"})
        body = example_manifest(
            namespace,
            applicationId=app_id,
            kafka={"bootstrapServers": kafka_bootstrap, "replicationFactor": 1},
            replicas=1,
            standbyReplicas=0,
            autoscaling={
                "minReplicas": 1,
                "maxReplicas": 3,
                "lagRecords": 100,
                "drainSeconds": 30,
                "stepTimeoutSeconds": 60,
                "behavior": {"scaleUp": {"stabilizationWindowSeconds": 0}},
            },
        )
        apply(kubectl, body)
        mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter,baton.dev/color=blue", 1)
        mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter,baton.dev/color=green", 1)

        def status() -> dict[str, Any]:
            return dict(get_json(kubectl, "sapp", "click-counter", "-n", namespace).get("status") or {})

        def blue_replicas() -> int:
            sts = get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)
            return int(sts["spec"]["replicas"])

        def events(reason: str) -> str:
            return kubectl(
                "get",
                "events",
                "-n",
                namespace,
                "--field-selector",
                f"reason={reason}",
                "-o",
                "jsonpath={.items[*].message}",
            ).stdout

        # at rest, no input: the autoscaler keeps one replica and says so
        wait_for(
            "Stable with status.autoscaling",
            lambda: status().get("phase") == "Stable" and "reason" in status().get("autoscaling", {}),
            timeout=30,
        )
        at_rest = status()["autoscaling"]
        assert at_rest["current"] == 1 and at_rest["replicas"] == {"blue": 1, "green": 1}, at_rest

        # a deploy starts (green never gets ready): the load comes, the decision is held
        apply(kubectl, {**body, "spec": {**body["spec"], "image": body["spec"]["image"] + "-next"}})
        wait_for("Deploying", lambda: status().get("phase") == "Deploying", timeout=20)
        load.start()
        held = wait_for(
            "scale-out held by the deploy",
            lambda: (
                a
                if (a := status().get("autoscaling", {})).get("heldBy") == "deploy" and a.get("desired") == 3
                else None
            ),
            timeout=20,
        )
        assert held["current"] == 1 and "held: a deploy is in progress" in held["reason"], held
        assert blue_replicas() == 1
        wait_for(
            "a ScalingHeld Event",
            lambda: "scale out 1 -> 3" in events("ScalingHeld"),
            timeout=10,
            detail=lambda: kubectl("get", "events", "-n", namespace).stdout,
        )

        # the spec goes back to what blue runs: the deploy is cancelled and blue scales out
        apply(kubectl, body)
        wait_for("blue at 3 replicas", lambda: blue_replicas() == 3, timeout=20)
        # the status follows the StatefulSet in the operator's next patch (a slow machine read
        # the held decision's status after the StatefulSet had moved)
        scaled = wait_for(
            "status.autoscaling at 3",
            lambda: a if (a := status().get("autoscaling", {})).get("current") == 3 else None,
            timeout=20,
        )
        assert scaled["current"] == 3 and scaled["replicas"]["blue"] == 3, scaled
        assert scaled["step"]["phase"] in ("ScalingOut", "WarmingUp") and scaled["step"]["to"] == 3, scaled
        assert scaled.get("lastScaleTime"), scaled
        started = wait_for(
            "a ScaleOutStarted Event",
            lambda: e if "blue: scale out 1 -> 3" in (e := events("ScaleOutStarted")) else None,
            timeout=10,
        )
        assert "records over the lag target" in started, started
        assert "busy fraction unknown" in started
    finally:
        load.close()


@contextmanager
def pod_addresses(workers: list[WorkerProcess]) -> Iterator[tuple[list[str], int]]:
    """Plays the Pod network: worker ``i`` answers GETs at ``127.0.0.{i + 2}:<port>`` (one port for
    all, as spec.worker.metricsPort is one port for every Pod), from its own port on 127.0.0.1."""

    def server(ip: str, port: int, worker: WorkerProcess) -> ThreadingHTTPServer:
        class Forward(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                try:  # a worker not started or not listening yet: the Pod does not answer
                    status, body = worker.http(self.path, worker.port(timeout=0.5))
                except (TimeoutError, OSError):
                    status, body = 503, "not listening"
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: object) -> None:
                pass

        s = ThreadingHTTPServer((ip, port), Forward)
        threading.Thread(target=s.serve_forever, daemon=True).start()
        return s

    ips = [f"127.0.0.{i + 2}" for i in range(len(workers))]
    servers: list[ThreadingHTTPServer] = []
    try:
        servers.append(server(ips[0], 0, workers[0]))
        port = int(servers[0].server_address[1])
        servers += [server(ip, port, w) for ip, w in zip(ips[1:], workers[1:], strict=True)]
        yield ips, port
    finally:
        for s in servers:
            s.shutdown()
            s.server_close()


def test_autoscaling_scales_in_from_the_workers_busy_fraction_while_they_keep_up(  # noqa: PLR0917 (fixtures)
    operator: Callable[..., OperatorProcess],
    kubectl: KubectlFn,
    namespace: str,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
) -> None:
    """Two Pods' workers keep up with a light input: from offsets alone that gives no decision
    (``heldBy: metrics``); their busy fraction, scraped from each Pod's /metrics, says one Pod
    is plenty, and the operator scales the active color in."""
    app_id = unique_name
    source = new_topic(partitions=PARTITIONS, name=f"{unique_name}-clicks")
    sink = new_topic(partitions=PARTITIONS, name=f"{unique_name}-counts")
    workers = [
        WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=f"{app_id}-blue",  # the operator's group for the blue color
            state_dir=tmp_path / f"s{i}",
            log_path=tmp_path / f"w{i}.log",
            instance_id=f"w{i}",
            env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
            # A changelog shorter than acceptable.recovery.lag makes the staying Pod caught up
            # with no state at all: the drained tasks then move at once, staged, and start warm
            # or not as the staging copy's race with the follow-up rebalance goes (a fresh-clone
            # run got both "restored"). With a low bound they are warmed up first and promoted
            # at the next probing rebalance, while the drained Pod still runs them. Commits
            # every second fill the changelog; the scale-in is allowed only once every
            # changelog partition is past the bound (below).
            extra_args=[
                "--acceptable-recovery-lag",
                str(RECOVERY_LAG),
                "--probing-rebalance-interval-ms",
                "2000",
                "--commit-interval-ms",
                "1000",
            ],
        )
        for i in range(2)
    ]
    # input flows before any commit: the group never shows "no input", which scales in without
    # a busy fraction too
    with SteadyInput(kafka_bootstrap, source, rate=100), pod_addresses(workers) as (ips, port):
        try:
            operator(env={"BATON_AUTOSCALING_INTERVAL_SECONDS": "1"})
            body = example_manifest(
                namespace,
                applicationId=app_id,
                kafka={"bootstrapServers": kafka_bootstrap, "replicationFactor": 1},
                replicas=2,
                standbyReplicas=0,
                worker={"metricsPort": port},
                autoscaling={
                    "minReplicas": 2,  # held at 2 until the changelogs are long enough (below)
                    "maxReplicas": 3,
                    "lagRecords": 1000,
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": 0}},
                },
            )
            apply(kubectl, body)
            mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter,baton.dev/color=green", 2)
            blue = mark_pods_ready(kubectl, namespace, "baton.dev/app=click-counter,baton.dev/color=blue", 2)
            for w, name, ip in zip(workers, sorted(blue), ips, strict=True):
                patch_pod_status(kubectl, namespace, name, {"podIP": ip, "podIPs": [{"ip": ip}]})
                # each worker is its Pod's, as the StatefulSet's environment makes it: the Pod's
                # name as its host, following the app's control topic (where drains are marked)
                w.env.update(
                    {"BATON_HOST": name, "BATON_COLOR": "blue", "BATON_CONTROL_TOPIC": f"{app_id}-control"}
                )
                w.start()

            def status() -> dict[str, Any]:
                return dict(get_json(kubectl, "sapp", "click-counter", "-n", namespace).get("status") or {})

            def blue_replicas() -> int:
                sts = get_json(kubectl, "statefulset", "click-counter-blue", "-n", namespace)
                return int(sts["spec"]["replicas"])

            wait_for(
                "both workers processing",
                lambda: all(w.metric("baton_records_consumed_total") > 0 for w in workers),
                60,
                every=0.5,
            )
            # A partition whose changelog is within the bound would move unwarmed ("restored"):
            # a CI run drained that early and got one. Only past it may the operator scale in.
            wait_for_changelog_past(kafka_bootstrap, f"{app_id}-blue", PARTITIONS, RECOVERY_LAG * 3)
            kubectl(
                "patch", "sapp", "click-counter", "-n", namespace, "--type=merge",
                "-p", json.dumps({"spec": {"autoscaling": {"minReplicas": 1}}}),
            )  # fmt: skip
            wait_for(
                "blue scaled in to 1 replica",
                lambda: blue_replicas() == 1,
                timeout=40,
                detail=lambda: json.dumps(status().get("autoscaling"), indent=1),
            )
            started = kubectl(
                "get",
                "events",
                "-n",
                namespace,
                "--field-selector",
                "reason=ScaleInStarted",
                "-o",
                "jsonpath={.items[*].message}",
            ).stdout
            # the decision came from the busy fraction, not from "no input" or the offsets' split
            assert "blue: scale in 2 -> 1" in started, started
            assert "busy" in started and "busy fraction unknown" not in started, started
            assert "no input" not in started, started
            print(f"ScaleInStarted: {started}")
            # the Pod that goes drained first: marked, it handed its tasks to the one that stays
            # (warmed up there: no standbys here) before the StatefulSet went down to 1
            assert any(str(x.get("msg", "")).startswith("marked to drain") for x in workers[1].logs())
            assert not any(str(x.get("msg", "")).startswith("marked to drain") for x in workers[0].logs())
            kinds = [str(x["kind"]) for x in workers[0].logs() if x.get("msg") == "active task started"]
            assert kinds[-2:] == ["promoted", "promoted"], kinds  # the drained Pod's two, warm
        finally:
            for w in workers:
                if w.alive:
                    w.stop(timeout=30)
