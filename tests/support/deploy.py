"""The click counter's input users and the counts read back, for the deploy tests."""

from __future__ import annotations

import orjson

from baton.testing import latest_by_key, read_all

USERS = ["alice", "bob", "carol", "dave", "erin"]


def counts(bootstrap: str, topic: str) -> dict[str, int]:
    latest = latest_by_key(read_all(bootstrap, topic))
    return {k.decode(): int(orjson.loads(v)) for k, v in latest.items() if k and v}
