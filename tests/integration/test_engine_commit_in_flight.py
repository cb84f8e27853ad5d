"""Revocations, a lost assignment and a shutdown while exactly-once commits are in flight (real broker).

Under exactly-once the periodic commit hands its broker part to a committer thread and the
processing thread goes on (``runtime/commit.py``, "Pipelined exactly-once commits"). Every
other commit must first finish that one: a revocation hands tasks to another member, a
lost assignment drops uncommitted work, a shutdown closes the producer. With spare CPU a
commit's broker part takes milliseconds, so a rebalance rarely lands inside one. Here each
worker's committer sleeps before its real work (the ``PRELUDE`` below; the broker, the
transactions and the group are real), so nearly every event does, and each worker logs
which events found a commit in flight. The rebalances and the shutdown do; the loss
has not in any run so far: after the freeze the group refuses the commit in flight before
the loss reaches the loop, so the test asserts nothing about that path but the counts.
A rebalance meets the commit in flight at the commit barrier before the member's JoinGroup
(``Worker._before_rejoin``, docs/architecture.md, "The commit barrier at rejoin"), which
finishes it and pauses commits until the assignment is applied: the revocation that
follows finds none in flight since then, but it would wait for one the same way (both
call ``Worker._commit``).

What must hold: read with ``read_committed``, every user's counts strictly increase (no
count is emitted twice or goes back) and end at the number of clicks sent; and the loop's
periodic commit never begins while the one before it is in flight (it used to wait for
it; now the loop goes on processing and commits after).
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.testing import SteadyInput, WorkerProcess, wait_for
from tests.support.click_counters import logged_errors, two_click_counters
from tests.support.counts import assert_strictly_increasing, sequences_if_exact

pytestmark = pytest.mark.integration

SESSION_MS = 6000
IN_FLIGHT = "test: a commit was in flight"

# Runs in each worker before ``baton run``. The committer thread sleeps twice: briefly before
# it sends the offsets (a rebalance that completes then makes the group refuse them: the
# commit fails and its work is redone), and half a second after, before the transaction's
# records are flushed and it is committed (a revocation, loss or shutdown then finds it in
# flight and must finish it first). The revocation, loss and shutdown paths, and the loop's
# periodic commit, log whether a commit was in flight when they began. The real methods run
# unchanged after that.
PRELUDE = f"""
import logging, threading, time
from baton.worker.runtime import commit as _commit, producer as _producer, worker as _worker

_end = _commit.ExactlyOnce._end_transaction
def _slow_end(self, producer, offsets, metadata):
    time.sleep(0.1)
    _end(self, producer, offsets, metadata)
_commit.ExactlyOnce._end_transaction = _slow_end

_flush = _producer.Output.flush
def _slow_flush(self, *args, **kwargs):
    if threading.current_thread().name.startswith("baton-commit"):
        time.sleep(0.5)
    return _flush(self, *args, **kwargs)
_producer.Output.flush = _slow_flush

def _noting(name):
    real = getattr(_worker.Worker, name)
    def noted(self, *args, **kwargs):
        if self.guarantee.unsettled and (name != "_commit" or kwargs.get("pipelined")):
            logging.getLogger("test").warning({IN_FLIGHT!r}, extra={{"during": name}})
        return real(self, *args, **kwargs)
    setattr(_worker.Worker, name, noted)
for _name in ("_on_revoke", "_on_lost", "_shutdown", "_commit", "_before_rejoin"):
    _noting(_name)
"""


def test_counts_stay_exact_when_rebalances_and_a_shutdown_meet_a_commit_in_flight(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    source = new_topic(4, name=f"{unique_name}-clicks")
    sink = new_topic(4, name=f"{unique_name}-counts")
    first, second = two_click_counters(
        kafka_bootstrap,
        unique_name,
        source,
        sink,
        tmp_path,
        session_ms=SESSION_MS,
        preludes=(PRELUDE, PRELUDE),
    )

    def failures() -> str:  # a worker that stopped on an error says which, instead of a bare timeout
        return logged_errors((first, second))

    def during(worker: WorkerProcess) -> list[str]:
        return [str(x["during"]) for x in worker.logs(current_run_only=False) if x.get("msg") == IN_FLIGHT]

    feed = SteadyInput(kafka_bootstrap, source, rate=400)
    try:
        with feed:
            first.start().wait_ready(60)
            wait_for(
                "the first worker counted nothing",
                lambda: first.metric("baton_records_consumed_total"),
                60,
                detail=failures,
            )
            second.start().wait_ready(60)  # the first hands half its tasks over: revocations
            wait_for(
                "the second worker never got a task",
                lambda: second.metric("baton_records_consumed_total"),
                60,
                detail=failures,
            )
            # Frozen past the session timeout, the first loses its tasks to the second; woken,
            # it finds them lost, with its commit still in flight, and rejoins.
            first.kill(signal.SIGSTOP)
            time.sleep(SESSION_MS / 1000 + 3)
            first.kill(signal.SIGCONT)
            wait_for(
                "the first worker never found its tasks lost",
                lambda: any(x.get("msg") == "partitions lost" for x in first.logs()),
                60,
                detail=failures,
            )

            def running_again() -> bool:  # tasks back after the loss (each rejoin waits for a slow commit)
                lines = [x.get("msg") for x in first.logs()]
                lost = lines.index("partitions lost")
                return "active task started" in lines[lost:]

            wait_for("the first worker never ran a task again", running_again, 60, detail=failures)
            time.sleep(1)  # its periodic commits run again: the shutdown meets one in flight
            assert first.stop(30) == 0, "the first worker did not stop cleanly"
            time.sleep(2)

        sequences = wait_for(
            "counts never became exact",
            lambda: sequences_if_exact(kafka_bootstrap, sink, feed.sent),
            120,
            every=2,
            detail=failures,
        )
        assert_strictly_increasing(sequences)
        seen = during(first) + during(second)
        assert {"_on_revoke", "_before_rejoin"} & set(seen), f"no rebalance met a commit in flight: {seen}"
        assert "_shutdown" in during(first), (
            f"the first worker's shutdown met no commit in flight: {during(first)}"
        )
        # the loop's periodic commit waits for none: it comes after the one in flight is done
        assert "_commit" not in seen, f"a periodic commit began with the one before still in flight: {seen}"
    finally:
        for w in (first, second):
            if w.alive:
                w.kill(signal.SIGCONT)
                w.stop(30)
