"""A rebalance does not abort the transaction of a member that keeps its tasks (issue 49).

Under exactly-once the pipelined commit names the group generation of the assignment the
processing thread last applied. A member joining or leaving bumps the generation; a commit
cut before that and sent after it was refused (ILLEGAL_GENERATION), its transaction aborted
and its input processed again (tens of aborts per scale step in ``bench/autoscale.py``).
Now a member commits what it holds before its JoinGroup (while the broker still waits for
it, so the old generation is current) and cuts no commit until the new assignment is
applied (``docs/architecture.md``, "Commit barrier at rejoin"). The members that stay here
go through a join and a leave with input flowing: none of them aborts a transaction, and
the output stays exact (each user's counts 1..n, in order, once each).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from baton.testing import SteadyInput, WorkerProcess, wait_for
from tests.support.flips import TOPOLOGY, assert_exact, latest_counts

pytestmark = pytest.mark.integration

ABORTED = "commit failed, aborting the transaction"  # commit.py, for every aborted commit


def _worker(bootstrap: str, app: str, topics: tuple[str, str], tmp: Path, name: str) -> WorkerProcess:
    return WorkerProcess(
        TOPOLOGY,
        bootstrap=bootstrap,
        application_id=app,
        state_dir=tmp / name,
        log_path=tmp / f"{name}.log",
        instance_id=f"{app}-{name}",
        env={"CLICKS_TOPIC": topics[0], "COUNTS_TOPIC": topics[1]},
        # every count reaches the output (no write cache), so a duplicate or a loss shows
        extra_args=["--no-write-cache"],
    )


def _generations(worker: WorkerProcess) -> list[int]:
    """The generations of the assignments the worker applied (one per rebalance it went through)."""
    return [int(str(x["generation"])) for x in worker.logs() if x.get("msg") == "assignment received"]


def _aborts(worker: WorkerProcess) -> list[str]:
    return [str(x.get("error")) for x in worker.logs() if x.get("msg") == ABORTED]


def test_members_that_keep_tasks_abort_no_transaction_when_a_member_joins_and_leaves(
    kafka_bootstrap: str, new_topic: Callable[..., str], unique_name: str, tmp_path: Path
) -> None:
    clicks, counts = new_topic(partitions=6), new_topic(partitions=6)
    topics = (clicks, counts)
    stay = [_worker(kafka_bootstrap, unique_name, topics, tmp_path, name) for name in ("a", "b")]
    third = _worker(kafka_bootstrap, unique_name, topics, tmp_path, "c")
    try:
        for w in stay:
            w.start()
        for w in stay:
            w.wait_ready(120)
        with SteadyInput(kafka_bootstrap, clicks, rate=300) as steady:
            wait_for(
                "the two members never both processed",
                lambda: all(any(x.get("msg") == "first record processed" for x in w.logs()) for w in stay),
                60,
            )
            before = [len(_generations(w)) for w in stay]
            third.start().wait_ready(120)  # a member joins: tasks move to it (cooperative, in rounds)
            wait_for(
                "the third member never got its tasks",
                lambda: any(x.get("msg") == "active task started" for x in third.logs()),
                60,
            )
            joined = [len(_generations(w)) for w in stay]
            third.stop()  # and leaves: the two take its tasks back
            wait_for(
                "the two never took the third's tasks back",
                lambda: all(len(_generations(w)) > j for w, j in zip(stay, joined, strict=True)),
                60,
            )
            # input goes on past the last rebalance (the output is read once it stops: a
            # read_committed reader meets transactions always open while it flows)
            time.sleep(2)
        sent = steady.sent
        wait_for("final counts", lambda: latest_counts(kafka_bootstrap, counts) == dict(sent), 120)
        assert_exact(kafka_bootstrap, counts, sent)
        rebalances = [len(_generations(w)) - b for w, b in zip(stay, before, strict=True)]
        aborts = {w.log_path.name: _aborts(w) for w in stay}
        assert all(j > b for j, b in zip(joined, before, strict=True)), (before, joined)  # the join's
        assert not any(aborts.values()), f"aborted transactions over {rebalances} rebalances: {aborts}"
    finally:
        for w in (*stay, third):
            if w.proc is not None and w.alive:
                w.stop()
