"""Which repartition records may be deleted: only below what was committed, only when it moved."""

from __future__ import annotations

import pytest

from baton.worker.runtime.purge import due_purges

pytestmark = pytest.mark.unit


def test_only_repartition_topics_whose_committed_offset_moved_are_purged() -> None:
    committed = [("app-by-page-repartition", 0, 120), ("app-by-page-repartition", 1, 40), ("clicks", 0, 999)]
    purged = {("app-by-page-repartition", 1): 40}
    assert due_purges(committed, {"app-by-page-repartition"}, purged) == {("app-by-page-repartition", 0): 120}
    assert due_purges(committed, set(), {}) == {}  # no repartition step: nothing, ever
    assert due_purges([("app-by-page-repartition", 0, 0)], {"app-by-page-repartition"}, {}) == {}
