"""Two colors of the click counter under a flip, and the exactness check of their output."""

from __future__ import annotations

import collections
import contextlib
from collections.abc import Iterator
from pathlib import Path

import orjson
from batondev.paths import REPO

from baton.control.channel import control_topic
from baton.control.messages import Color
from baton.testing import WorkerProcess, read_all

TOPOLOGY = str(REPO / "examples" / "click_counter.py")


@contextlib.contextmanager
def running_colors(  # noqa: PLR0917
    tmp: Path,
    bootstrap: str,
    base: str,
    clicks: str,
    counts: str,
    per_color: int,
    topology: str = TOPOLOGY,
    color_env: dict[Color, dict[str, str]] | None = None,
) -> Iterator[dict[Color, list[WorkerProcess]]]:
    """Workers of both colors, started and ready for the block, stopped after it."""
    out: dict[Color, list[WorkerProcess]] = {"blue": [], "green": []}
    for color in ("blue", "green"):
        for i in range(per_color):
            env = {
                "CLICKS_TOPIC": clicks,
                "COUNTS_TOPIC": counts,
                "BATON_COLOR": color,
                "BATON_CONTROL_TOPIC": control_topic(base),
                **(color_env or {}).get(color, {}),
            }
            out[color].append(
                WorkerProcess(
                    topology,
                    bootstrap=bootstrap,
                    application_id=f"{base}-{color}",
                    state_dir=tmp / f"{color}-{i}",
                    log_path=tmp / f"{color}-{i}.log",
                    instance_id=f"{base}-{color}-{i}",
                    env=env,
                    extra_args=["--no-write-cache"],
                ).start()
            )
    workers = out["blue"] + out["green"]
    try:
        for w in workers:
            w.wait_ready(120)
        yield out
    finally:
        for w in workers:
            w.stop()


def assert_exact(bootstrap: str, counts_topic: str, sent: collections.Counter[str]) -> int:
    """Each user's output is 1..n in order: nothing lost, nothing duplicated, nothing reordered."""
    per_key: dict[str, list[int]] = collections.defaultdict(list)
    for rec in read_all(bootstrap, counts_topic):
        assert rec.key is not None and rec.value is not None
        per_key[rec.key.decode()].append(int(orjson.loads(rec.value)))
    assert set(per_key) == set(sent)
    for user, n in sent.items():
        seq = per_key[user]
        if seq != list(range(1, n + 1)):
            dupes = [c for c, k in collections.Counter(seq).items() if k > 1]
            lost = sorted(set(range(1, n + 1)) - set(seq))
            raise AssertionError(
                f"{user}: {len(seq)} outputs for {n} inputs; duplicated {dupes[:10]}, "
                f"lost {lost[:10]}, first disorder at "
                f"{next((i for i in range(1, len(seq)) if seq[i] <= seq[i - 1]), None)}"
            )
    return sum(len(v) for v in per_key.values())


def latest_counts(bootstrap: str, topic: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in read_all(bootstrap, topic):
        if rec.key is not None and rec.value is not None:
            out[rec.key.decode()] = int(orjson.loads(rec.value))
    return out
