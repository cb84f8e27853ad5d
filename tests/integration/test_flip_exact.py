"""Blue-green flips under continuous input lose and duplicate nothing (issue 6).

Both colors run the click counter with the write cache off, so every input record yields
exactly one output record and the output of one uninterrupted run is known: for each user,
the counts 1, 2, ..., n in order. The test compares the read_committed sink topic with that,
record by record, after flips back and forth while input keeps arriving.
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import pytest

from baton.control.channel import control_topic
from baton.control.coordinator import FlipResult, flip
from baton.control.messages import Color
from baton.worker.testing import SteadyInput, WorkerProcess, read_all, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = str(REPO / "examples" / "click_counter.py")


@contextlib.contextmanager
def _running(  # noqa: PLR0917
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


def _assert_exact(bootstrap: str, counts_topic: str, sent: collections.Counter[str]) -> int:
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


@pytest.fixture
def app(new_topic: Callable[..., str], unique_name: str) -> Iterator[tuple[str, str, str]]:
    yield unique_name, new_topic(partitions=4), new_topic(partitions=4)


def test_five_flips_under_steady_input_are_exact(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    base, clicks, counts = app
    with _running(tmp_path, kafka_bootstrap, base, clicks, counts, per_color=1):
        results: list[FlipResult] = []
        with SteadyInput(kafka_bootstrap, clicks, rate=400) as steady:
            time.sleep(3)
            for i in range(5):
                to: Color = "green" if i % 2 == 0 else "blue"
                result = flip(kafka_bootstrap, base, to, deadline_s=15)
                assert result.committed, result.reason
                results.append(result)
                time.sleep(2)
        sent = steady.sent
        expected_total = sum(sent.values())

        wait_for(lambda: _latest(kafka_bootstrap, counts) == dict(sent), 120, "final counts")
        assert _assert_exact(kafka_bootstrap, counts, sent) == expected_total
        assert [r.to for r in results] == ["green", "blue", "green", "blue", "green"]
        assert all(len(r.cut) == 4 for r in results)


def test_flip_aborts_when_a_color_is_down_and_old_active_keeps_emitting(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    base, clicks, counts = app
    with _running(tmp_path, kafka_bootstrap, base, clicks, counts, per_color=1) as workers:
        workers["green"][0].stop()
        result = flip(kafka_bootstrap, base, "green", deadline_s=5)
        assert not result.committed
        assert "green" in result.reason and "no position before the deadline" in result.reason
        # blue is still active: new input is counted and emitted
        with SteadyInput(kafka_bootstrap, clicks, rate=200) as steady:
            time.sleep(2)
        sent = steady.sent
        wait_for(lambda: _latest(kafka_bootstrap, counts) == dict(sent), 90, "counts after the aborted flip")
        _assert_exact(kafka_bootstrap, counts, sent)


def _latest(bootstrap: str, topic: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for rec in read_all(bootstrap, topic):
        if rec.key is not None and rec.value is not None:
            out[rec.key.decode()] = int(orjson.loads(rec.value))
    return out


def test_new_active_ahead_holds_until_old_active_drained(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    """Blue (active) is slower than the input, so green is ahead at the flip: green must wait for
    blue to emit up to the cut before it emits itself, or per-key order would break."""
    base, clicks, counts = app
    slow = str(REPO / "tests" / "fixtures" / "slow_click_counter.py")
    with _running(
        tmp_path,
        kafka_bootstrap,
        base,
        clicks,
        counts,
        per_color=1,
        topology=slow,
        color_env={"blue": {"CLICK_DELAY_MS": "10"}},
    ) as workers:
        blue, green = workers["blue"][0], workers["green"][0]
        with SteadyInput(kafka_bootstrap, clicks, rate=300) as steady:
            # blue handles <100 records/s of 300/s, so after 4 s it is ~800 records behind green.
            # Its batches shrink to ~0.1 s of work (baton/worker/batching.py), so it sees the
            # prepare at once and reports a position well behind green's: green holds at the cut
            # while blue drains the backlog, about 8 s.
            time.sleep(4)
            result = flip(kafka_bootstrap, base, "green", deadline_s=20)
            time.sleep(1)
        assert result.committed, result.reason
        assert result.pending, "green was not ahead of blue on any partition: the test did not test the hold"
        sent = steady.sent
        wait_for(lambda: _latest(kafka_bootstrap, counts) == dict(sent), 180, "final counts")
        _assert_exact(kafka_bootstrap, counts, sent)
        assert any(
            line.get("msg") == "holding at the cut until the old active drains" for line in green.logs()
        )
        assert any(line.get("msg") == "old active drained, emitting" for line in green.logs())
        drained = [line for line in blue.logs() if line.get("msg") == "drained below the cut"]
        assert len(drained) == len(result.pending)


def test_worker_killed_during_flip_keeps_output_exact(
    kafka_bootstrap: str, app: tuple[str, str, str], tmp_path: Path
) -> None:
    base, clicks, counts = app
    with _running(tmp_path, kafka_bootstrap, base, clicks, counts, per_color=2) as workers:
        outcomes: list[FlipResult] = []
        with SteadyInput(kafka_bootstrap, clicks, rate=300) as steady:
            time.sleep(2)
            for victim, to in ((workers["blue"][1], "green"), (workers["green"][0], "blue")):
                flipper = threading.Thread(
                    target=lambda to=to: outcomes.append(flip(kafka_bootstrap, base, to, deadline_s=8))
                )
                flipper.start()
                time.sleep(0.05)
                victim.kill()  # SIGKILL while the flip is being prepared
                flipper.join(120)
                victim.start()  # a restart, as the StatefulSet controller would do
                victim.wait_ready(120)
                time.sleep(2)
        sent = steady.sent
        assert len(outcomes) == 2
        wait_for(lambda: _latest(kafka_bootstrap, counts) == dict(sent), 180, "final counts")
        _assert_exact(kafka_bootstrap, counts, sent)
