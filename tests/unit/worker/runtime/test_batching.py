"""The processing loop's batch size adapts so a round stays within its time budget."""

from baton.worker.runtime.batching import MAX_BATCH, BatchSizer


def test_fast_rounds_keep_the_full_batch() -> None:
    sizer = BatchSizer(budget_s=0.1)
    for _ in range(10):
        assert sizer.observe(MAX_BATCH, 0.02) == MAX_BATCH


def test_slow_rounds_shrink_until_a_round_fits_the_budget() -> None:
    sizer = BatchSizer(budget_s=0.1)
    per_record = 0.01  # 10 ms per record: 1,000 records would be a 10 s round
    size = sizer.size
    for _ in range(20):
        size = sizer.observe(size, size * per_record)
    assert size * per_record <= 0.1
    assert size >= 5  # not collapsed to 1 record per round either


def test_a_short_round_over_budget_shrinks_from_what_it_held() -> None:
    sizer = BatchSizer(budget_s=0.1)
    assert sizer.observe(40, 0.5) == 20


def test_grows_back_only_on_full_fast_rounds() -> None:
    sizer = BatchSizer(budget_s=0.1)
    sizer.observe(1000, 1.0)
    assert sizer.size == 500
    assert sizer.observe(10, 0.001) == 500  # a partial round says nothing about a full one
    assert sizer.observe(500, 0.01) == 1000


def test_never_below_one_record() -> None:
    sizer = BatchSizer(budget_s=0.1)
    for _ in range(20):
        sizer.observe(1, 5.0)
    assert sizer.size == 1
