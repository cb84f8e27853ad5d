"""The restore thread against a real broker: a standby that was paused can still be promoted.

The thread pauses standby partitions while an active task restores (they share one
consumer). librdkafka keeps a partition paused across unassign and assign, so a standby
paused at the moment it was promoted restored as an active task that never fetched: the
task stayed "restoring" for good (seen in bench/scaleout.py). Both orders are checked: the
promoted standby was paused, and a released standby that comes back is not left paused.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from baton.testing import wait_for
from baton.worker.naming import TaskId
from baton.worker.state.restore import RestoreJob, Restorer, TaskRestore
from baton.worker.state.stores import MemoryStore

pytestmark = pytest.mark.integration


def _produce(producer: Producer, topic: str, key: bytes, partition: int) -> None:
    while True:
        try:
            producer.produce(topic, b"1", key, partition=partition)
            return
        except BufferError:
            producer.poll(0.1)


def test_a_paused_standby_promoted_to_active_finishes_its_restore(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    changelog = new_topic(2)
    producer = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20})
    for i in range(300_000):  # partition 0: long enough to restore that the standby is paused meanwhile
        _produce(producer, changelog, f"big{i}".encode(), 0)
    for i in range(2000):
        _produce(producer, changelog, f"small{i}".encode(), 1)
    assert producer.flush(60) == 0
    big, small = TaskId(0, 0), TaskId(0, 1)
    restorer = Restorer({"bootstrap.servers": kafka_bootstrap, "group.id": "restore-thread-test"})
    ready: dict[TaskId, threading.Event] = {big: threading.Event(), small: threading.Event()}

    def restore(task: TaskId, *, standby: bool, store: MemoryStore) -> TaskRestore:
        job = RestoreJob(task, "s", changelog, task.partition, store, tail=standby, standby=standby)
        return TaskRestore(task, [job], lambda r: ready[r.task].set(), standby=standby)

    restorer.start()
    try:
        standby_store = MemoryStore()
        # a standby placed while an active task restores is paused before it ever fetches...
        restorer.add(restore(small, standby=True, store=standby_store))
        restorer.add(restore(big, standby=False, store=MemoryStore()))
        wait_for("the standby was never paused", lambda: (changelog, 1) in restorer._paused, 30)
        assert not ready[big].is_set(), "the active restore ended before the standby was paused"
        # ...and promoted while paused: removed, then restored as an active task from its copy
        restorer.remove(small)
        restorer.add(restore(small, standby=False, store=standby_store))
        wait_for("the promoted standby never finished its restore", ready[small].is_set, 30)
        wait_for("the active restore never finished", ready[big].is_set, 30)
        assert restorer.error is None
        assert len(list(standby_store.items())) == 2000
    finally:
        restorer.stop()
        restorer.join(10)
