"""The click counter's input users and the counts read back, for the deploy tests."""

from __future__ import annotations

from typing import Any

import orjson

from baton.testing import latest_by_key, read_all
from tests.support.operator import example_manifest

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
