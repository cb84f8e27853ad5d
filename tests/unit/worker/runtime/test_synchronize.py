"""Timestamp-synchronized processing of a task's inputs within a poll's batch."""

from __future__ import annotations

import random

import pytest

from baton.worker.runtime.synchronize import synchronized

pytestmark = pytest.mark.unit


def _order(timestamps: list[int], inputs: list[list[tuple[int, int]]]) -> list[int]:
    return [k for start, stop in synchronized(inputs, timestamps.__getitem__) for k in range(start, stop)]


def test_the_smallest_head_goes_first_and_slices_stop_at_the_other_inputs_next_record() -> None:
    # batch: partition A at 0-2 (ts 5, 6, 20), partition B at 3-4 (ts 1, 10)
    ts = [5, 6, 20, 1, 10]
    slices = list(synchronized([[(0, 3)], [(3, 5)]], ts.__getitem__))
    assert slices == [(3, 4), (0, 2), (4, 5), (2, 3)]


def test_ties_go_to_the_input_listed_first_and_one_input_keeps_its_runs() -> None:
    assert _order([7, 7, 7, 7], [[(0, 2)], [(2, 4)]]) == [0, 1, 2, 3]
    assert list(synchronized([[(0, 2), (5, 6)]], lambda _k: 0)) == [(0, 2), (5, 6)]


def test_every_record_once_partition_order_kept_and_each_pick_is_the_smallest_head() -> None:
    rng = random.Random(4)
    for _ in range(200):
        parts = rng.randint(1, 4)
        layout = [rng.randrange(parts) for _ in range(rng.randint(1, 30))]
        ts = [rng.randrange(20) for _ in layout]
        inputs: list[list[tuple[int, int]]] = [[] for _ in range(parts)]
        for k, p in enumerate(layout):  # runs: maximal stretches of one partition
            if k and layout[k - 1] == p:
                inputs[p][-1] = (inputs[p][-1][0], k + 1)
            else:
                inputs[p].append((k, k + 1))
        order = _order(ts, inputs)
        assert sorted(order) == list(range(len(layout)))
        queues = {p: [k for a, b in inputs[p] for k in range(a, b)] for p in range(parts)}
        for k in order:
            heads = [q[0] for q in queues.values() if q]
            assert ts[k] <= min(ts[h] for h in heads)  # no other input had an earlier record waiting
            assert queues[layout[k]].pop(0) == k  # offset order within a partition
