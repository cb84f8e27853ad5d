"""The operator's Kafka side with a real broker: control topic, lag in status, DeleteTopics."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from batondev.paths import CLICK_COUNTER
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource  # type: ignore[attr-defined]

from baton.control.channel import ControlWriter
from baton.control.messages import ActiveState, Commit
from baton.operator.flips import ControlFollower, ControlState, read_state
from baton.testing import WorkerProcess, wait_for
from tests.support.operator import KubectlFn, OperatorProcess, apply, example_manifest, get_json, try_get_json

pytestmark = pytest.mark.integration


def _commit(bootstrap: str, group: str, topic: str, offset: int) -> None:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def _topics(admin: AdminClient) -> set[str]:
    return set(admin.list_topics(timeout=10).topics)


def test_control_topic_lag_and_delete_topics(  # noqa: PLR0917 (fixtures)
    operator: Callable[..., OperatorProcess],
    kubectl: KubectlFn,
    namespace: str,
    kafka_bootstrap: str,
    kafka_admin: AdminClient,
    new_topic: Callable[..., str],
    unique_name: str,
) -> None:
    app_id = unique_name
    source = new_topic(partitions=1)
    producer = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(10):
        producer.produce(source, value=str(i).encode())
    producer.flush(10)
    _commit(kafka_bootstrap, f"{app_id}-blue", source, 4)  # blue is 6 records behind
    changelog = new_topic(partitions=1, name=f"{app_id}-blue-counts-changelog")
    dlq = new_topic(partitions=1, name=f"{app_id}-blue-dlq")

    operator()
    apply(
        kubectl,
        example_manifest(
            namespace,
            applicationId=app_id,
            kafka={"bootstrapServers": kafka_bootstrap, "replicationFactor": 1},
            deletionPolicy="DeleteTopics",
        ),
    )

    def status() -> dict[str, Any]:
        return dict(get_json(kubectl, "sapp", "click-counter", "-n", namespace).get("status", {}))

    wait_for(
        "control topic in status", lambda: status().get("topics", {}).get("control") == f"{app_id}-control"
    )
    control = f"{app_id}-control"
    assert control in _topics(kafka_admin)
    resource = ConfigResource(ConfigResource.Type.TOPIC, control)
    configs = kafka_admin.describe_configs([resource])[resource].result(10)
    assert configs["cleanup.policy"].value == "compact"
    meta = kafka_admin.list_topics(topic=control, timeout=10).topics[control]
    assert len(meta.partitions) == 1

    wait_for("lag in status", lambda: status().get("lag") == 6, timeout=30)
    assert status()["colors"]["blue"]["lag"] == 6
    row = kubectl("get", "sapp", "click-counter", "-n", namespace, "--no-headers").stdout.split()
    assert row[6] == "6"  # the LAG column
    events = kubectl("get", "events", "-n", namespace, "--field-selector", "reason=TopicCreated").stdout
    assert control in events
    sapp = get_json(kubectl, "sapp", "click-counter", "-n", namespace)
    assert "baton.dev/operator" in sapp["metadata"]["finalizers"]

    kubectl("delete", "sapp", "click-counter", "-n", namespace, "--timeout=60s")
    assert try_get_json(kubectl, "sapp", "click-counter", "-n", namespace) is None
    remaining = _topics(kafka_admin)
    assert control not in remaining and changelog not in remaining
    assert dlq in remaining and source in remaining  # dead letters and inputs are not internal
    deleted = kubectl(
        "get", "events", "-n", namespace, "--field-selector", "reason=TopicsDeleted", "-o", "json"
    )
    messages = [e["message"] for e in json.loads(deleted.stdout)["items"]]
    assert any(changelog in m and control in m for m in messages), messages


def test_unreachable_kafka_does_not_block_kubernetes(
    operator: Callable[..., OperatorProcess], kubectl: KubectlFn, namespace: str
) -> None:
    operator()
    apply(kubectl, example_manifest(namespace, kafka={"bootstrapServers": "127.0.0.1:1"}))
    wait_for(
        "statefulsets", lambda: try_get_json(kubectl, "statefulset", "click-counter-green", "-n", namespace)
    )
    message = wait_for(
        "Kafka trouble in status",
        lambda: (
            get_json(kubectl, "sapp", "click-counter", "-n", namespace)
            .get("status", {})
            .get("topics", {})
            .get("message")
        ),
        timeout=60,
    )
    assert "Kafka" in message


def test_status_shows_how_many_tasks_have_a_caught_up_standby(  # noqa: PLR0917 (fixtures)
    operator: Callable[..., OperatorProcess],
    kubectl: KubectlFn,
    namespace: str,
    kafka_bootstrap: str,
    new_topic: Callable[..., str],
    unique_name: str,
    tmp_path: Path,
) -> None:
    """Two real workers form the blue group; the operator reads the leader's count from the broker."""
    app_id = unique_name
    partitions = 4
    env = {
        "CLICKS_TOPIC": new_topic(partitions, name=f"{app_id}-clicks"),
        "COUNTS_TOPIC": new_topic(partitions, name=f"{app_id}-counts"),
    }
    workers = [
        WorkerProcess(
            CLICK_COUNTER,
            bootstrap=kafka_bootstrap,
            application_id=f"{app_id}-blue",
            state_dir=tmp_path / f"s{i}",
            log_path=tmp_path / f"w{i}.log",
            instance_id=f"w{i}",
            env=env,
            extra_args=["--num-standby-replicas", "1"],
        ).start()
        for i in range(2)
    ]
    try:
        for w in workers:
            w.wait_ready(60)
        operator()
        apply(
            kubectl,
            example_manifest(
                namespace,
                applicationId=app_id,
                kafka={"bootstrapServers": kafka_bootstrap, "replicationFactor": 1},
            ),
        )

        def standbys() -> Any:
            status = get_json(kubectl, "sapp", "click-counter", "-n", namespace).get("status", {})
            return status.get("standbys")

        want = {"tasks": partitions, "withStandby": partitions, "caughtUp": partitions}
        wait_for(
            "standby coverage in status",
            lambda: standbys() == want,
            timeout=60,
            detail=lambda: f"status.standbys is {standbys()}",
        )
        header, row = kubectl("get", "sapp", "click-counter", "-n", namespace).stdout.splitlines()[:2]
        column = header.index("WARM-STANDBYS")  # cells start where their header does
        assert row[column:].split()[0] == str(partitions), (header, row)
    finally:
        for w in workers:
            w.stop(30)


def test_the_control_follower_reads_what_is_new_and_agrees_with_a_fresh_read(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    """Issue 18: one long-lived consumer per app instead of a new one reading from offset 0
    every pass; what it folds must be what a fresh read folds."""
    topic = new_topic(partitions=1)
    follower = ControlFollower(kafka_bootstrap, topic, {})
    writer = ControlWriter(kafka_bootstrap, topic, f"test-{topic}")
    try:
        assert follower.state() == ControlState("blue", 0)
        for epoch, color in ((1, "green"), (2, "blue"), (3, "green")):
            commit = Commit(ActiveState(epoch, color))  # type: ignore[arg-type]
            writer.write((commit.key(), commit.encode()))
            seen = follower.state()
            assert seen == ControlState(color, epoch), seen  # type: ignore[arg-type]
            assert seen == read_state(kafka_bootstrap, topic, {})
    finally:
        writer.close()
        follower.close()
