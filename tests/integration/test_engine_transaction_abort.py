"""An aborted transaction leaves nothing behind that fails the next one (real broker).

Aborting a transaction with records still queued purges them, and librdkafka reports each
purged record as failed (``_PURGE_QUEUE``) before ``abort_transaction`` returns. Those
reports belong to work that is being redone anyway; kept, they failed the next commit too,
an abort of good work for nothing. A task lost in a rebalance aborts this way, and so does
a commit whose offsets the group refuses while records are still in flight.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

import pytest

from baton.testing import read_all
from baton.worker.config import ProcessingGuarantee, WorkerConfig
from baton.worker.runtime.clients import ClientSettings
from baton.worker.runtime.commit import ExactlyOnce
from baton.worker.runtime.producer import Output

pytestmark = pytest.mark.integration


class _NoOffsets:
    """The group member: never asked here (commits without tasks send no offsets)."""

    def group_metadata(self) -> bytes:
        raise AssertionError("no offsets were to be sent")

    def commit(self, offsets: Mapping[tuple[str, int], tuple[int, str]], timeout: float = 30.0) -> None:
        raise AssertionError("exactly-once commits offsets in the transaction")


def test_a_commit_after_an_abort_with_queued_records_succeeds(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    changelog = new_topic(partitions=1)
    config = WorkerConfig(
        topology="examples/click_counter.py",
        bootstrap_servers=kafka_bootstrap,
        application_id=f"abort-test-{uuid.uuid4().hex[:6]}",
        processing_guarantee=ProcessingGuarantee.EXACTLY_ONCE_V2,
    )
    output = Output(ClientSettings(config, "blue-0").producer(), {changelog})  # the worker's own producer
    guarantee = ExactlyOnce(output, _NoOffsets())
    guarantee.start()
    for i in range(100_000):  # far more than one linger's batch: most are still queued at the abort
        output.send(changelog, b"k%d" % i, b"aborted", 0, 0, None)
    assert len(output.producer) > 0, "every record was delivered before the abort: nothing to purge"
    guarantee.abort()

    output.send(changelog, b"k", b"committed", 0, 0, None)
    assert guarantee.commit([]), "the commit after the abort failed"
    assert [(r.key, r.value) for r in read_all(kafka_bootstrap, changelog)] == [(b"k", b"committed")]
