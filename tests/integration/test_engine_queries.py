"""Interactive queries on the real broker: after SIGKILLs under exactly-once, any pod answers any key.

Two click-counter workers are killed and restarted while clicks arrive; once the output is
exact, every user's count is asked of a randomly chosen worker. The worker that owns the
key's partition answers, the other redirects to it (routing metadata from the group
protocol), and every answer is the exact committed count. Ranges and metadata cover the
whole key space between the two workers with no overlap.
"""

from __future__ import annotations

import random
import time
import urllib.error
import urllib.parse
import urllib.request
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from batondev.paths import CLICK_COUNTER

from baton.testing import read_all, wait_for
from tests.support.kills import feed_while_killing, start_workers

pytestmark = pytest.mark.integration

STORE = "user-counts-store"


def _get(port: int, path: str, **params: str) -> tuple[int, dict[str, Any]]:
    """What a client does: follow the 307 to the owner, retry a 503 (a rebalance moving the task)."""
    url = f"http://127.0.0.1:{port}{path}?{urllib.parse.urlencode(params)}"
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(url, timeout=15) as reply:
                return reply.status, orjson.loads(reply.read())
        except urllib.error.HTTPError as exc:
            if exc.code != 503 or time.monotonic() > deadline:
                return exc.code, orjson.loads(exc.read() or b"{}")
        time.sleep(0.2)


def test_any_worker_answers_any_key_with_the_exact_count_after_sigkills(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(6, name=f"{unique_name}-clicks")
    sink = new_topic(6, name=f"{unique_name}-counts")
    rng = random.Random(12)
    users = [f"u{rng.randrange(150)}" for _ in range(15_000)]
    expected = Counter(users)
    records = [(u.encode(), orjson.dumps({"user_id": u, "timestamp": i})) for i, u in enumerate(users)]
    workers = start_workers(
        str(CLICK_COUNTER),
        bootstrap=kafka_bootstrap,
        app=unique_name,
        tmp_path=tmp_path,
        env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
        stable_ports=True,
    )
    try:
        kills = feed_while_killing(
            workers, bootstrap=kafka_bootstrap, topic=source, records=records, chunk=1500, min_kills=2, seed=4
        )

        def exact() -> bool:
            last = {r.key: int(r.value) for r in read_all(kafka_bootstrap, sink) if r.key and r.value}
            return last == {u.encode(): n for u, n in expected.items()}

        wait_for("the counts never became exact", exact, 180, every=2)
        ports = [w.port() for w in workers]

        def routed() -> dict[str, list[int]] | None:
            status, doc = _get(ports[0], f"/metadata/{STORE}")
            members = doc.get("members", {})
            covered = sorted(p for ps in members.values() for p in ps)
            return members if status == 200 and len(members) == 2 and covered == list(range(6)) else None

        members = wait_for("the routing metadata never covered both workers", routed, 60, every=1)
        asked = Counter[int]()
        for user, n in sorted(expected.items()):
            port = rng.choice(ports)
            status, doc = _get(port, f"/stores/{STORE}", key=user)
            assert (status, doc.get("value")) == (200, n), (user, port, doc)
            asked[port] += 1
        ranges = [_get(port, f"/stores/{STORE}", **{"from": ""})[1] for port in ports]
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
    assert kills >= 2 and min(asked.values()) > 20
    local = [{e["key"]: e["value"] for e in r["entries"]} for r in ranges]
    assert not set(local[0]) & set(local[1])  # each key lives in one worker's active tasks
    assert local[0] | local[1] == dict(expected)
    assert all(len(ps) == 3 for ps in members.values())  # 6 partitions over 2 workers
