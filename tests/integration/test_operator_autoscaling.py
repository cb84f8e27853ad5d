"""spec.autoscaling against the real API server and Kafka: the operator samples the active
color's group offsets each pass, holds scaling during a deploy, and scales the active
StatefulSet out when the input outruns what the group commits.

No workers run (the harness plays kubelet): the test is the "slow consumer", committing the
active color's group offsets at less than the input rate, so its lag grows past lagRecords.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from baton.testing import wait_for
from tests.support.operator import (
    KubectlFn,
    OperatorProcess,
    apply,
    example_manifest,
    get_json,
    mark_pods_ready,
)

pytestmark = pytest.mark.integration

PARTITIONS = 4


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
        scaled = status()["autoscaling"]
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
