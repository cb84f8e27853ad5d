"""Windowed counts on record time: correct windows, and a replay from the start gives the same output."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

from baton.testing import WorkerProcess, produce, read_all, wait_for
from tests.support.event_time import event_time_origin

pytestmark = pytest.mark.integration

TOPOLOGY = """
import os
from baton import JSON, STR, Topology, hopping, tumbling

topology = Topology()
clicks = topology.stream(os.environ["IN"], key=STR, value=JSON)
(clicks.group_by_key().windowed_by(tumbling(10_000)).count(store="tumbling").to_stream()
    .map(lambda w, n: (f"t:{w.key}@{w.start}", n)).to(os.environ["OUT"], key=STR, value=JSON))
(clicks.group_by_key().windowed_by(hopping(10_000, 5_000)).count(store="hopping").to_stream()
    .map(lambda w, n: (f"h:{w.key}@{w.start}", n)).to(os.environ["OUT"], key=STR, value=JSON))
"""


def _expected(events: list[tuple[str, int]]) -> Counter[str]:
    out: Counter[str] = Counter()
    for user, ts in events:
        out[f"t:{user}@{ts - ts % 10_000}"] += 1
        for start in (ts - ts % 5_000, ts - ts % 5_000 - 5_000):
            if start >= 0 and start <= ts < start + 10_000:
                out[f"h:{user}@{start}"] += 1
    return out


def test_windowed_count_replayed_from_the_start_gives_the_same_output(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(4, name=f"{unique_name}-in")
    module = tmp_path / "windowed.py"
    module.write_text(TOPOLOGY)
    rng = random.Random(11)
    origin = event_time_origin()  # two minutes of events from here, out of order
    events = [(f"u{rng.randrange(20)}", origin + rng.randrange(0, 120_000)) for _ in range(4000)]
    produce(
        kafka_bootstrap,
        source,
        [(u.encode(), orjson.dumps({"user_id": u, "timestamp": ts}), ts) for u, ts in events],
    )
    expected = _expected(events)

    def run(run_id: str) -> dict[str, list[int]]:
        out = new_topic(4, name=f"{unique_name}-out{run_id}")
        w = WorkerProcess(
            str(module),
            bootstrap=kafka_bootstrap,
            application_id=f"{unique_name}-{run_id}",
            state_dir=tmp_path / run_id,
            log_path=tmp_path / f"{run_id}.log",
            env={"IN": source, "OUT": out},
            extra_args=["--no-write-cache"],
        ).start()
        try:

            def sequences() -> dict[str, list[int]] | None:
                seq: dict[str, list[int]] = {}
                for r in read_all(kafka_bootstrap, out):
                    assert r.key is not None and r.value is not None
                    seq.setdefault(r.key.decode(), []).append(int(r.value))
                return seq if {k: v[-1] for k, v in seq.items()} == dict(expected) else None

            return wait_for(f"run {run_id} never produced the expected windows", sequences, 90, every=1)
        finally:
            assert w.stop() == 0

    first, second = run("a"), run("b")
    assert first == second  # every per-key update sequence, not only the final values
    # cache off: one output per window a record falls in (3, or 2 near time zero)
    assert sum(len(v) for v in first.values()) == sum(expected.values()) > 2 * len(events)
