"""Chaos from ``kubectl apply`` to exact counts (issue 10), the short CI variant.

The click counter runs as a StreamApp (two colors, 2 replicas each, one standby of every
task, exactly-once, write cache off) under the real operator, everything as Pods on the
stack's node from the runtime image (the operator installed with the chart). Clicks arrive
at a fixed rate while the test, every 10 s and also in the middle of rollouts and flips,
deletes a worker Pod, SIGKILLs a worker container's process, kills the operator's Pod, or
SIGKILLs the kubelet and starts it again (one fault of each kind plus one mid-deploy
operator kill). Then the ``read_committed`` output must be exactly what the input implies, per
user the counts 1..n in order, and the StreamApp must be Ready again.

Two deploys (podTemplate env changes) go through the operator's blue-green flow (update
the idle color, wait until ready and caught up, flip, upgrade the old color later), with a
rollback (the ``baton.dev/rollback`` annotation) right after the first and the operator
SIGKILLed in the middle of the second, which is a Rebuild (``upgrade.stateMigration``): the
idle color gets a new application id generation with empty state that replays the input
from offset 0 and must emit none of it again. The test never flips by itself. The long variant
is ``bench/chaos.py``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest
from batondev.chaos import Chaos, ChaosConfig

from tests.conftest import Node
from tests.support.progress import say

pytestmark = pytest.mark.e2e


def test_faults_and_deploys_on_the_node_under_steady_input_keep_the_output_exact(
    *,
    node: Node,
    node_runtime_image: str,
    namespace: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = ChaosConfig(
        faults=4,  # one of each kind; bench/chaos.py runs many
        fault_interval_s=10.0,
        deploys=2,
        rollbacks=1,
        rate=40,
        replicas=2,
        standby_replicas=1,
        partitions=4,
        # the second deploy rebuilds: the idle color gets a new, empty application id
        # generation that replays the input silently (issue 16: it used to emit it all again)
        state_migrations=("Reuse", "Rebuild"),
        node_image=node_runtime_image,
    )
    chaos = Chaos(
        cfg,
        namespace=namespace,
        bootstrap=node.kafka_bootstrap,
        clicks_topic=new_topic(partitions=cfg.partitions),
        counts_topic=new_topic(partitions=cfg.partitions),
        workdir=tmp_path,
        say=lambda line: say(capsys, line),
    )
    report = chaos.run()
    with capsys.disabled():
        print(f"\nchaos e2e: faults injected\n{report.events_table()}\n{report.summary_table()}")

    kinds = report.by_kind()
    faults = ("delete-pod", "kill-worker", "restart-operator", "restart-kubelet")
    assert all(kinds.get(k) for k in faults), kinds
    assert kinds.get("deploy") == 2 and kinds.get("rollback") == 1, kinds
    deploys = [e.detail for e in sorted(report.events, key=lambda e: e.at_s) if e.kind == "deploy"]
    # Reuse keeps the color's application id; Rebuild flips to <applicationId>-<color>-g<N>
    assert deploys[0].startswith("Reuse") and not re.search(r"-g\d+;", deploys[0]), deploys
    assert deploys[1].startswith("Rebuild") and re.search(r"-(blue|green)-g\d+;", deploys[1]), deploys
    assert any("mid-deploy" in e.detail for e in report.events), "the operator was not restarted mid-deploy"
    assert report.repaired == report.faults, "a killed or deleted process was not seen running again"
    verdict = report.verdict
    assert verdict.records_in > 0
    assert verdict.exact, "\n".join(verdict.problems[:20])
    assert verdict.records_out == verdict.records_in
    assert report.final_ready, "the StreamApp did not return to Ready"
