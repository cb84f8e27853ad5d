"""spec.autoscaling end to end on the node (issue 49), the short variant of bench/autoscale.py.

The operator (installed with the chart, its autoscaling pass every 2 s) runs
``examples/lookup_counter.py`` as a StreamApp with ``spec.autoscaling`` (1..4 replicas, a lag
target of 3 s of input, 10 s up and 20 s down windows), exactly-once, on the stack's node
from the runtime image. The lookup waits 4 ms per click, so one replica serves about 240
clicks/s: the input runs at 100/s, then 400/s (one replica falls behind: the operator must
scale out; on a loaded machine one replica may fall behind the 100/s already, and a
scale-out then is right if the group was behind its lag target throughout the scale-up window),
then 100/s again, then stops (no input: back to one replica). The counts must be
exactly 1..n per user in order, and while the rate holds, the replicas change at most once
after the scale-up window (no flapping). The scenario is ``batondev.autoscale``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from batondev.autoscale import Autoscale, AutoscaleConfig

from tests.conftest import Node
from tests.support.progress import say

pytestmark = pytest.mark.e2e

# clicks/s; one replica serves about 240, so LOW keeps it below the 70 % utilisation target
LOW, HIGH = 100, 400
HIGH_FROM, HIGH_TO, END = 15.0, 60.0, 85.0


def test_the_operator_scales_out_under_load_and_back_in_without_flapping_and_counts_stay_exact(
    *,
    node: Node,
    node_runtime_image: str,
    namespace: str,
    new_topic: Callable[..., str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = AutoscaleConfig(
        profile=((0, LOW), (HIGH_FROM, LOW), (HIGH_FROM, HIGH), (HIGH_TO, HIGH), (HIGH_TO, LOW), (END, LOW)),
        partitions=6,
        keys=120,
        lookup_wait_ms=4.0,
        min_replicas=1,
        max_replicas=4,
        lag_seconds=3.0,
        scale_up_window_s=10,
        scale_down_window_s=20,
        scale_down_policies=[{"type": "Percent", "value": 100, "periodSeconds": 10}],
        step_timeout_s=90,
        operator_interval_s=2,
        sample_every_s=2,
        settle_to_replicas=1,
        settle_timeout_s=120,
        catch_up_timeout_s=120,
        node_image=node_runtime_image,
    )
    report = Autoscale(
        cfg,
        namespace=namespace,
        bootstrap=node.kafka_bootstrap,
        clicks_topic=new_topic(partitions=cfg.partitions),
        counts_topic=new_topic(partitions=cfg.partitions, config={"message.timestamp.type": "LogAppendTime"}),
        workdir=tmp_path,
        say=lambda line: say(capsys, line),
    ).run()
    with capsys.disabled():
        print(f"\n{report.samples_table()}\n\n{report.steps_table()}\n{report.reasons()}\n")
        print(report.summary_table())

    check = report.check
    assert check.records_in > 0
    assert check.exact, "\n".join(check.problems[:20])
    assert check.records_out == check.records_in
    replicas = [s.replicas for s in report.samples if s.replicas is not None]
    assert max(replicas) >= 2, f"never scaled out: {report.samples_table()}"
    outs = [st for st in report.steps if st.to_replicas > st.from_replicas]
    assert outs, report.steps_table()
    # the load scaled it out, not the low rate, unless one replica fell behind the low rate
    # (a loaded machine); startedAt has whole seconds
    early = report.early_scale_out(HIGH_FROM - 1, LOW)
    assert early is None, f"{early}\n{report.samples_table()}\n{report.reasons()}"
    assert report.settled, f"not back at 1 replica after the input stopped: {report.samples_table()}"
    assert replicas[-1] == 1
    # no flapping: once the scale-up window has passed at a steady rate, at most one change
    assert report.replica_changes(HIGH_FROM + cfg.scale_up_window_s, HIGH_TO) <= 1, report.samples_table()
    assert report.replica_changes(HIGH_TO, END) <= 1, report.samples_table()
