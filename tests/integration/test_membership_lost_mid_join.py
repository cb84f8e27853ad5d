"""A member removed from the group in the middle of a rebalance loses its tasks, even if it gets them back.

Found by a CI run of ``test_engine_commit_in_flight.py``: a worker frozen while its JoinGroup
was answered woke to a SyncGroup refused with UNKNOWN_MEMBER_ID. kafka-python reset its
generation and joined again under a new member id, but it had already run its
pre-rebalance step, so it never called ``on_partitions_lost``: it still counted the
partitions it held before as its own, and the leader handed them back. Meanwhile the other
worker had owned them, processed and committed. Kept with their old state and positions,
the tasks would count the same clicks again from the old state: the same counts emitted
twice, and the new generation's identity makes the broker accept that commit.

Here the first worker's membership thread stalls once (a ``time.sleep`` after a JoinGroup
response, in the worker's own interpreter: the prelude below) past the session timeout,
while its processing thread goes on. The broker, the group and the transactions are real.
What must hold: the first worker reports its tasks lost, and, read with ``read_committed``,
every user's counts strictly increase and end at the number of clicks sent.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.testing import SteadyInput, wait_for
from tests.support.click_counters import logged_errors, two_click_counters
from tests.support.counts import assert_strictly_increasing, sequences_if_exact

pytestmark = pytest.mark.integration

SESSION_MS = 6000
STALLED = "test: membership stalled after a JoinGroup"


def _prelude(flag: Path) -> str:
    """Stall the membership thread once, after the first JoinGroup response that finds ``flag``."""
    return f"""
import logging, os, time
from kafka.coordinator import base as _base

_process = _base.BaseCoordinator._process_join_group_response
def _stalled(self, *args, **kwargs):
    out = _process(self, *args, **kwargs)
    if os.path.exists({str(flag)!r}):
        os.remove({str(flag)!r})
        logging.getLogger("baton.worker.test").warning({STALLED!r})
        time.sleep({SESSION_MS / 1000 + 3})
    return out
_base.BaseCoordinator._process_join_group_response = _stalled
"""


def test_a_member_removed_mid_rebalance_loses_its_tasks_and_counts_stay_exact(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(4, name=f"{unique_name}-clicks")
    sink = new_topic(4, name=f"{unique_name}-counts")
    flag = tmp_path / "stall-next-join"
    first, second = two_click_counters(
        kafka_bootstrap,
        unique_name,
        source,
        sink,
        tmp_path,
        session_ms=SESSION_MS,
        preludes=(_prelude(flag), ""),
    )

    def errors() -> str:
        return logged_errors((first, second))

    feed = SteadyInput(kafka_bootstrap, source, rate=400)
    try:
        with feed:
            first.start().wait_ready(60)
            wait_for(
                "the first worker counted nothing", lambda: first.metric("baton_records_consumed_total"), 60
            )
            flag.touch()  # the second's join starts a rebalance: the first stalls in it
            second.start().wait_ready(60)
            wait_for(
                "the first worker's membership never stalled",
                lambda: any(x.get("msg") == STALLED for x in first.logs()),
                60,
                detail=errors,
            )
            wait_for(
                "the first worker never found its tasks lost",
                lambda: any(x.get("msg") == "partitions lost" for x in first.logs()),
                60,
                detail=errors,
            )

            def rejoined() -> bool:
                msgs = [x.get("msg") for x in first.logs()]
                return "assignment received" in msgs[msgs.index("partitions lost") :]

            wait_for("the first worker never rejoined after the loss", rejoined, 60, detail=errors)
            time.sleep(3)
            assert first.stop(30) == 0, "the first worker did not stop cleanly"
            time.sleep(2)

        sequences = wait_for(
            "counts never became exact",
            lambda: sequences_if_exact(kafka_bootstrap, sink, feed.sent),
            120,
            every=2,
            detail=errors,
        )
        assert_strictly_increasing(sequences)
    finally:
        for w in (first, second):
            if w.alive:
                w.kill(signal.SIGCONT)
                w.stop(30)
