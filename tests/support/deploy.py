"""The click counter as the deploy tests run it: its input users and a steady producer of their
clicks, its manifest, its StreamApp's status and the counts read back."""

from __future__ import annotations

import collections
import random
import threading
import time
from typing import Any

import orjson

from baton.testing import latest_by_key, produce, read_all
from tests.support.event_time import event_time_origin
from tests.support.operator import KubectlFn, example_manifest, get_json

USERS = ["alice", "bob", "carol", "dave", "erin"]


def counts(bootstrap: str, topic: str) -> dict[str, int]:
    latest = latest_by_key(read_all(bootstrap, topic))
    return {k.decode(): int(orjson.loads(v)) for k, v in latest.items() if k and v}


def bluegreen_manifest(
    namespace: str, application_id: str, kafka: dict[str, Any], topics: tuple[str, str], **spec: Any
) -> dict[str, Any]:
    """The click counter as the deploy tests run it: one worker a color, no standby, quick
    promotion, its topics (clicks, counts) and an APP_VERSION a deploy changes; ``spec`` adds
    or overrides fields."""
    clicks, counts = topics
    body: dict[str, Any] = {
        "kafka": kafka,
        "applicationId": application_id,
        "replicas": 1,
        "standbyReplicas": 0,
        "resources": {},
        "state": {"store": "rocksdb", "size": "256Mi"},
        "upgrade": {
            "strategy": "BlueGreen",
            "promotionStableSeconds": 2,
            "standbyUpgradeDelaySeconds": 4,
            "promotionTimeoutSeconds": 120,
        },
        "podTemplate": {
            "env": [
                {"name": "CLICKS_TOPIC", "value": clicks},
                {"name": "COUNTS_TOPIC", "value": counts},
                {"name": "APP_VERSION", "value": "v1"},
            ]
        },
    }
    return example_manifest(namespace, **(body | spec))


class Clicks:
    """Produces clicks at a steady rate in a thread; remembers what it sent."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.sent: collections.Counter[str] = collections.Counter()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._rng = random.Random(7)
        self._n = 0
        self._origin = event_time_origin()  # a millisecond a click from here: never an hour ahead

    def batch(self, n: int) -> None:
        records = []
        for _ in range(n):
            user = self._rng.choice(USERS)
            ms = self._origin + self._n
            self._n += 1
            records.append((user.encode(), orjson.dumps({"user_id": user, "timestamp": ms // 1000}), ms))
            self.sent[user] += 1
        produce(self.bootstrap, self.topic, records)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.batch(20)  # ~100 clicks/s
            time.sleep(0.2)

    def __enter__(self) -> Clicks:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)


def status(kubectl: KubectlFn, namespace: str) -> dict[str, Any]:
    st: dict[str, Any] = get_json(kubectl, "sapp", "click-counter", "-n", namespace).get("status", {})
    return st
