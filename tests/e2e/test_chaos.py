"""Chaos from ``kubectl apply`` to exact counts (issue 10), the short CI variant.

The click counter runs as a StreamApp (two colors, 2 replicas each, one standby of every
task, exactly-once, write cache off) under the real operator, with its Pods run as local
processes by the pod runner. Clicks arrive at a fixed rate while the test, every 12 s and
also in the middle of rollouts and flips, deletes a worker Pod, SIGKILLs a worker process,
or SIGKILLs and restarts the operator (6 faults plus one mid-deploy operator restart). Then the ``read_committed`` output must be exactly what the input implies, per
user the counts 1..n in order, and the StreamApp must be Ready again.

Two deploys (podTemplate env changes) go through the operator's blue-green flow (update
the idle color, wait until ready and caught up, flip, upgrade the old color later), with a
rollback (the ``baton.dev/rollback`` annotation) right after the first and the operator
SIGKILLed in the middle of the second. The test never flips by itself. The long variant
is ``bench/chaos.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from batondev.chaos import Chaos, ChaosConfig

pytestmark = pytest.mark.e2e


def _say(capsys: pytest.CaptureFixture[str], line: str) -> None:
    """Progress goes to the terminal as it happens, so a CI log shows where a slow run is."""
    with capsys.disabled():
        print(line, flush=True)


@pytest.mark.usefixtures("kube")
def test_faults_and_deploys_under_steady_input_keep_the_output_exact(
    kafka_bootstrap: str,
    namespace: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = ChaosConfig(
        faults=6,
        fault_interval_s=12.0,
        deploys=2,
        rollbacks=1,
        rate=40,
        replicas=2,
        standby_replicas=1,
        partitions=4,
    )
    chaos = Chaos(
        cfg,
        namespace=namespace,
        bootstrap=kafka_bootstrap,
        clicks_topic=new_topic(partitions=cfg.partitions),
        counts_topic=new_topic(partitions=cfg.partitions),
        workdir=tmp_path,
        say=lambda line: _say(capsys, line),
    )
    report = chaos.run()
    with capsys.disabled():
        print(f"\nchaos e2e: faults injected\n{report.events_table()}\n{report.summary_table()}")

    kinds = report.by_kind()
    assert sum(kinds.get(k, 0) for k in ("delete-pod", "kill-worker", "restart-operator")) >= 5, kinds
    assert all(kinds.get(k) for k in ("delete-pod", "kill-worker", "restart-operator")), kinds
    assert kinds.get("deploy") == 2 and kinds.get("rollback") == 1, kinds
    assert any("mid-deploy" in e.detail for e in report.events), "the operator was not restarted mid-deploy"
    assert report.repaired == report.faults, "a killed or deleted process was not seen running again"
    verdict = report.verdict
    assert verdict.records_in > 0
    assert verdict.exact, "\n".join(verdict.problems[:20])
    assert verdict.records_out == verdict.records_in
    assert report.final_ready, "the StreamApp did not return to Ready"


@pytest.mark.usefixtures("kube")
def test_rebuild_deploys_and_a_rollback_under_kills_emit_nothing_twice(
    kafka_bootstrap: str,
    namespace: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``upgrade.stateMigration: Rebuild`` (issue 16, hole 1): each deploy gives the idle color a
    new application id generation that replays the input from offset 0 while the other color
    is active, then is flipped to; a rollback flips back, and the StandbyUpgraded step rebuilds
    the old color again. Before the fix, the rebuilt color re-emitted everything below the cut."""
    cfg = ChaosConfig(
        faults=3,
        fault_interval_s=12.0,
        deploys=2,
        rollbacks=1,
        rate=40,
        replicas=2,
        standby_replicas=1,
        partitions=4,
        seed=11,
        state_migration="Rebuild",
        operator_restart_in_deploy=False,
    )
    chaos = Chaos(
        cfg,
        namespace=namespace,
        bootstrap=kafka_bootstrap,
        clicks_topic=new_topic(partitions=cfg.partitions),
        counts_topic=new_topic(partitions=cfg.partitions),
        workdir=tmp_path,
        say=lambda line: _say(capsys, line),
    )
    report = chaos.run()
    with capsys.disabled():
        print(f"\nchaos e2e (Rebuild): faults injected\n{report.events_table()}\n{report.summary_table()}")

    deploys = [e for e in report.events if e.kind == "deploy"]
    # the flipped-to color ran a new generation: <applicationId>-<color>-g<N>
    assert len(deploys) == 2 and all(re.search(r"-(blue|green)-g\d+;", e.detail) for e in deploys), [
        e.detail for e in deploys
    ]
    assert report.repaired == report.faults, "a killed or deleted process was not seen running again"
    verdict = report.verdict
    assert verdict.records_in > 0
    assert verdict.exact, "\n".join(verdict.problems[:20])
    assert verdict.records_out == verdict.records_in
    assert report.final_ready, "the StreamApp did not return to Ready"
