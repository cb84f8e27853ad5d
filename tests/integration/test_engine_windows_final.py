"""Final window results under SIGKILLs and exactly-once: every window written once, with its exact value.

Runs examples/page_views.py (session windows, suppress, timestamp extractor) as shipped,
and tumbling- and sliding-window twins, on the real broker: two workers, input arriving while they
are killed at random, views up to 300 ms out of order (within the 500 ms grace). Stream
time, the window index and the "already emitted" state all come back from the store
after each kill, so the output must be exactly the offline answer: no session missing,
none twice, none split or merged differently. The tumbling windows stay in the store for
a minute after they close, so a restarted task that forgot its stream time would emit
them again.
"""

from __future__ import annotations

import itertools
import os
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from batondev.paths import REPO
from confluent_kafka import Producer

from baton.testing import read_all, wait_for
from tests.support.event_time import event_time_origin
from tests.support.kills import feed_while_killing, start_workers

pytestmark = pytest.mark.integration

GAP_MS, GRACE_MS, JITTER_MS, WINDOW_MS = 1000, 500, 300, 1000
USERS, VIEWS, PARTITIONS = 40, 12_000, 4
SENTINEL = "~end"

TUMBLING = f"""
import os
from baton import JSON, STR, Json, Topology, tumbling, until_window_closes
from examples.page_views import PageView

topology = Topology()
(topology.stream(os.environ["PAGE_VIEWS_TOPIC"], key=STR, value=Json(PageView),
                 timestamp=lambda _k, view, _ts: view.timestamp)
    .group_by_key()
    .windowed_by(tumbling({WINDOW_MS}, grace={GRACE_MS}, retention=60_000))
    .count(store="per-second")
    .suppress(until_window_closes())
    .to_stream()
    .map(lambda w, n: (w.key, {{"user_id": w.key, "start": w.start, "end": w.end, "views": n}}), key=STR)
    .to(os.environ["SESSIONS_TOPIC"], value=JSON))
"""

SLIDING = TUMBLING.replace("tumbling", "sliding").replace("per-second", "within-a-second")


def _views(seed: int, origin: int) -> list[tuple[str, str, int]]:
    """(user, page, event time): time moves forward from ``origin``, each view up to JITTER_MS late."""
    rng = random.Random(seed)
    now, out = origin, []
    for _ in range(VIEWS):
        now += rng.randrange(0, 8)
        out.append((f"u{rng.randrange(USERS)}", f"/p{rng.randrange(5)}", now - rng.randrange(JITTER_MS)))
    return out


def _sessions(views: list[tuple[str, str, int]]) -> list[tuple[str, int, int, int]]:
    """Offline sessionization: a user's views with gaps of at most GAP_MS form one session."""
    by_user: dict[str, list[int]] = {}
    for user, _page, ts in views:
        by_user.setdefault(user, []).append(ts)
    out = []
    for user, times in by_user.items():
        times.sort()
        start = end = times[0]
        n = 0
        for ts in times:
            if ts - end > GAP_MS:
                out.append((user, start, end, n))
                start, n = ts, 0
            end, n = ts, n + 1
        out.append((user, start, end, n))
    return sorted(out)


def _tumbling(views: list[tuple[str, str, int]]) -> list[tuple[str, int, int, int]]:
    counts: dict[tuple[str, int], int] = {}
    for user, _page, ts in views:
        start = ts - ts % WINDOW_MS
        counts[user, start] = counts.get((user, start), 0) + 1
    return sorted((user, start, start + WINDOW_MS, n) for (user, start), n in counts.items())


def _sliding(views: list[tuple[str, str, int]]) -> list[tuple[str, int, int, int]]:
    """KIP-450's windows by definition: each view's [t - size, t], and [t + 1, t + 1 + size] when not empty."""
    by_user: dict[str, list[int]] = {}
    for user, _page, ts in views:
        by_user.setdefault(user, []).append(ts)
    out = []
    for user, times in by_user.items():
        starts = {t - WINDOW_MS for t in times} | {
            t + 1 for t in times if any(t < u <= t + 1 + WINDOW_MS for u in times)
        }
        for start in starts:
            out.append((user, start, start + WINDOW_MS, sum(start <= t <= start + WINDOW_MS for t in times)))
    return sorted(out)


def _close_every_partition(bootstrap: str, topic: str, at: int) -> None:
    """A view far in the future on every partition: stream time passes every real window's close."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for partition in range(PARTITIONS):
        view = {"user_id": SENTINEL, "page": "/", "timestamp": at}
        producer.produce(topic, orjson.dumps(view), SENTINEL.encode(), partition=partition)
    assert producer.flush(30) == 0


@pytest.mark.parametrize("kind", ["sessions", "tumbling", "sliding"])
def test_final_windows_are_exact_across_sigkills(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path, kind: str
) -> None:
    source = new_topic(PARTITIONS, name=f"{unique_name}-views")
    sink = new_topic(PARTITIONS, name=f"{unique_name}-out")
    if kind == "sessions":
        module = str(REPO / "examples" / "page_views.py")
    else:
        (tmp_path / f"{kind}_views.py").write_text(TUMBLING if kind == "tumbling" else SLIDING)
        module = str(tmp_path / f"{kind}_views.py")
    views = _views(seed={"sessions": 21, "tumbling": 22, "sliding": 23}[kind], origin=event_time_origin())
    expected = {"sessions": _sessions, "tumbling": _tumbling, "sliding": _sliding}[kind](views)
    env = {
        "PAGE_VIEWS_TOPIC": source,
        "SESSIONS_TOPIC": sink,
        "SESSION_GAP_MS": str(GAP_MS),
        "SESSION_GRACE_MS": str(GRACE_MS),
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    records = [
        (user.encode(), orjson.dumps({"user_id": user, "page": page, "timestamp": ts}))
        for user, page, ts in views
    ]
    workers = start_workers(module, bootstrap=kafka_bootstrap, app=unique_name, tmp_path=tmp_path, env=env)
    try:
        kills = feed_while_killing(
            workers, bootstrap=kafka_bootstrap, topic=source, records=records, chunk=1000, min_kills=4, seed=9
        )
        _close_every_partition(kafka_bootstrap, source, at=max(ts for *_, ts in views) + 60_000)

        last: list[Counter[tuple[str, int, int, int]]] = [Counter()]

        def written() -> list[dict[str, Any]] | None:
            out = [orjson.loads(r.value) for r in read_all(kafka_bootstrap, sink) if r.value is not None]
            got = sorted((o["user_id"], o["start"], o["end"], o["views"]) for o in out)
            last[0] = Counter(got)
            return out if got == expected else None

        def difference() -> str:
            missing, extra = Counter(expected) - last[0], last[0] - Counter(expected)
            return f"{sum(missing.values())} missing, e.g. {sorted(missing)[:3]}; {sum(extra.values())} extra, e.g. {sorted(extra)[:3]}"

        out = wait_for(
            f"the {len(expected)} final windows never came out exactly once",
            written,
            180,
            every=2,
            detail=difference,
        )
    finally:
        for w in workers:
            if w.alive:
                w.stop(30)
    assert kills >= 4
    per_user: dict[str, list[int]] = {}
    for o in out:  # in offset order per partition, and a user's windows all go to one partition
        per_user.setdefault(o["user_id"], []).append(o["start"])
    for user, starts in per_user.items():
        assert all(a < b for a, b in itertools.pairwise(starts)), (
            f"{user}: windows repeated or reordered {starts}"
        )
    if kind == "sessions":
        pages = {(o["user_id"], o["start"]): o["pages"] for o in out}
        assert all(p == sorted(set(p)) and 1 <= len(p) <= 5 for p in pages.values())
