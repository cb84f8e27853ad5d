"""Branch, merge and the late left-join record against the broker, exactly-once.

Two topics merged, counted per key (the counts must rise by one per record: exactly once),
and split into branches written to two topics (each record in exactly one of them). Then
a left join fed a record already past its window and grace: emitted at once as
``(record, None)``, as Kafka Streams does.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import pytest

from baton.testing import WorkerProcess, produce, read_all, wait_for
from tests.support.counts import assert_strictly_increasing, sequences_if_exact
from tests.support.event_time import event_time_origin
from tests.support.kills import start_workers

pytestmark = pytest.mark.integration

PARTITIONS = 3

BRANCH_MERGE = """
import os
from baton import JSON, STR, Branched, Topology

topology = Topology()
a = topology.stream(os.environ["A"], key=STR, value=JSON)
b = topology.stream(os.environ["B"], key=STR, value=JSON)
merged = a.merge(b)
merged.group_by_key().count(store="merged-counts").to_stream().to(os.environ["COUNTS"], value=JSON)
branches = (merged.split(name="n-")
    .branch(lambda _k, v: v["n"] % 3 == 0, Branched.as_("fizz"))
    .default_branch(Branched.as_("rest")))
branches["n-fizz"].to(os.environ["FIZZ"])
branches["n-rest"].to(os.environ["REST"])
"""

LATE_JOIN = """
import os
from baton import JSON, STR, Topology, within

topology = Topology()
clicks = topology.stream(os.environ["CLICKS"], key=STR, value=JSON)
views = topology.stream(os.environ["VIEWS"], key=STR, value=JSON)
(clicks.left_join(views, lambda c, v: {"click": c["id"], "view": v and v["id"]},
                  windows=within(500, grace=0))
    .to(os.environ["OUT"], value=JSON))
"""


@contextmanager
def _worker(
    source: str, bootstrap: str, app: str, tmp_path: Path, env: dict[str, str]
) -> Iterator[WorkerProcess]:
    """One exactly-once worker running the topology ``source``, stopped on the way out."""
    module = tmp_path / "topology.py"
    module.write_text(source)
    (worker,) = start_workers(str(module), bootstrap=bootstrap, app=app, tmp_path=tmp_path, env=env, count=1)
    try:
        yield worker
    finally:
        if worker.alive:
            worker.stop(30)


def test_merged_topics_are_counted_once_and_split_into_exclusive_branches(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    a, b = new_topic(PARTITIONS, name=f"{unique_name}-a"), new_topic(PARTITIONS, name=f"{unique_name}-b")
    counts, fizz, rest = (
        new_topic(PARTITIONS, name=f"{unique_name}-{n}") for n in ("counts", "fizz", "rest")
    )
    rows = [(f"k{i % 40}", i) for i in range(3000)]
    sent = Counter(k for k, _ in rows)
    env = {"A": a, "B": b, "COUNTS": counts, "FIZZ": fizz, "REST": rest}
    with _worker(BRANCH_MERGE, kafka_bootstrap, unique_name, tmp_path, env):
        for topic, half in ((a, rows[0::2]), (b, rows[1::2])):
            produce(kafka_bootstrap, topic, [(k.encode(), orjson.dumps({"n": n})) for k, n in half])
        seq = wait_for(
            "the merged counts never reached the records sent",
            lambda: sequences_if_exact(kafka_bootstrap, counts, sent),
            120,
            every=1,
        )
        assert_strictly_increasing(seq)

        def branched() -> tuple[list[int], list[int]] | None:
            got = [
                [orjson.loads(r.value or b"")["n"] for r in read_all(kafka_bootstrap, t)]
                for t in (fizz, rest)
            ]
            return (got[0], got[1]) if len(got[0]) + len(got[1]) >= len(rows) else None

        fizzes, others = wait_for("the branches never held every record", branched, 60, every=1)
        assert sorted(fizzes) == [n for _, n in rows if n % 3 == 0]
        assert sorted(others) == [n for _, n in rows if n % 3 != 0]


def test_a_late_left_join_record_is_emitted_at_once_unmatched(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    clicks, views, out = (new_topic(1, name=f"{unique_name}-{n}") for n in ("clicks", "views", "out"))
    origin = event_time_origin()
    with _worker(
        LATE_JOIN, kafka_bootstrap, unique_name, tmp_path, {"CLICKS": clicks, "VIEWS": views, "OUT": out}
    ):
        produce(
            kafka_bootstrap,
            clicks,
            [
                (b"u1", orjson.dumps({"id": "ahead"}), origin + 60_000),  # stream time: origin + 1 min
                (b"u2", orjson.dumps({"id": "late"}), origin),  # 1 min behind a 500 ms window, no grace
            ],
        )

        def joined() -> list[tuple[bytes | None, dict[str, str | None]]] | None:
            got = [(r.key, orjson.loads(r.value or b"")) for r in read_all(kafka_bootstrap, out)]
            return got or None

        got = wait_for("the late click never came out", joined, 60, every=1)
        # the late click at once, unmatched; the one ahead waits for its window (and a view)
        assert got == [(b"u2", {"click": "late", "view": None})]
