"""Sliding windows (KIP-450) checked against their definition: for any arrival order, the
windows in the store are exactly the distinct record sets ``[t - d, t]`` and
``[t + 1, t + 1 + d]`` (when not empty), each holding the sum of its records."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baton import JSON, STR, Topology, sliding, until_window_closes
from baton.worker.topology.windows import SlidingWindows, WindowedSerde
from tests.support.tasks import Msg, make_task

pytestmark = pytest.mark.unit

D = 10


def topology(grace: int = 10**9, final: bool = False) -> Topology:
    t = Topology()
    table = (
        t.stream("in", key=STR, value=JSON)
        .group_by_key()
        .windowed_by(sliding(D, grace=grace))
        .aggregate(lambda: 0, lambda _k, v, total: total + v, store="sums")
    )
    if final:
        table = table.suppress(until_window_closes())
    table.to_stream().to("out", key=WindowedSerde(STR, D), value=JSON)
    return t


def expected_windows(records: list[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    """The definition: each record's left window, and its right window when a later record is in it."""
    out: dict[tuple[str, int], int] = {}
    for key in {k for k, _, _ in records}:
        times = [(t, v) for k, t, v in records if k == key]
        starts = {t - D for t, _ in times} | {
            t + 1 for t, _ in times if any(t < u <= t + 1 + D for u, _ in times)
        }
        for s in starts:
            if s >= 0:
                out[key, s] = sum(v for t, v in times if s <= t <= s + D)
    return out


def run(records: list[tuple[str, int, int]]) -> dict[tuple[str, int], int]:
    task, _sent, dead, stores = make_task(topology(), caching=False)
    for offset, (key, ts, amount) in enumerate(records, start=10):
        task.process(Msg("in", offset, key.encode(), orjson.dumps(amount), ts=ts))
    assert not dead
    task.flush()
    task.committed_ok({})
    serde = WindowedSerde(STR, D)
    got: dict[tuple[str, int], int] = {}
    for raw, value in stores["sums"].items():
        if raw:
            window = serde.deserialize(raw)
            assert window.end == window.start + D
            got[window.key, window.start] = orjson.loads(value)
    return got


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["a", "b"]), st.integers(0, 60), st.integers(1, 9)), min_size=1, max_size=25
    )
)
def test_windows_match_the_definition_in_any_arrival_order(records: list[tuple[str, int, int]]) -> None:
    shifted = [(k, t + 100, v) for k, t, v in records]  # far from 0: librdkafka reads 0 as "now"
    got = run(shifted)
    assert got == expected_windows(shifted)


def test_records_after_the_grace_period_are_dropped_and_closed_windows_never_change() -> None:
    late: list[int] = []
    task, _sent, _dead, stores = make_task(topology(grace=5), caching=False, on_late=lambda: late.append(1))
    for offset, (ts, value) in enumerate([(100, 1), (105, 2), (140, 4), (103, 8), (131, 16)], start=10):
        task.process(Msg("in", offset, b"k", orjson.dumps(value), ts=ts))
    # at 140 (stream time), windows ending before 135 have closed and, with the default
    # retention (difference + grace + 1), left the store with the records they held
    assert late == [1]  # 103: every window that could hold it had closed
    task.flush()
    task.committed_ok({})
    serde = WindowedSerde(STR, D)
    got = {serde.deserialize(k).start: orjson.loads(v) for k, v in stores["sums"].items() if k}
    # 131 joins 140's left window [130, 140] and makes [132, 142] (140 alone); its own left
    # window [121, 131] had closed (at 137), so it is not made
    assert got == {130: 4 + 16, 132: 4}
    assert stores["sums-records"].checkpoint() is None and len(list(stores["sums-records"].items())) == 2


def test_final_results_come_once_per_window_when_it_closes() -> None:
    task, sent, _dead, _stores = make_task(topology(grace=0, final=True), caching=False)
    for offset, ts in enumerate([100, 104, 120, 200], start=10):
        task.process(Msg("in", offset, b"k", orjson.dumps(1), ts=ts))
    serde = WindowedSerde(STR, D)
    out = [(serde.deserialize(k or b"").start, orjson.loads(v or b"null")) for k, v in sent.to("out")]
    assert out == [(90, 1), (94, 2), (101, 1), (110, 1)]  # [105, 115] and later are empty or open


def test_sliding_windows_validate_their_settings() -> None:
    with pytest.raises(ValueError, match="positive"):
        SlidingWindows(0)
    with pytest.raises(ValueError, match="retention"):
        sliding(10, grace=5, retention=15)
    assert sliding(10, grace=5).retention_ms == 16
