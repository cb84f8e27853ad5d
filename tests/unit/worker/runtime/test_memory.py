"""The processing process's memory settings take effect (glibc's top pad, the collector's generations)."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap

import pytest

from baton.worker.runtime.memory import GC_FIRST_GENERATION, keep_heap_top, settle_garbage_collector

pytestmark = pytest.mark.unit


def test_glibc_keeps_the_heap_top_so_a_second_interval_takes_no_page_faults() -> None:
    """The effect itself, in a fresh process: free a commit interval's worth of small objects, build it again."""
    script = textwrap.dedent(
        """
        import resource, sys
        from baton.worker.runtime.memory import keep_heap_top
        if sys.argv[1] == "pad":
            assert keep_heap_top()
        def interval():
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            held = [bytes(1000) for _ in range(10_000)]  # 10 MB from the C heap (not pymalloc), then freed
            del held
            return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
        interval()
        print(interval())
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    faults = {
        mode: int(
            subprocess.run(
                [sys.executable, "-c", script, mode], env=env, capture_output=True, text=True, check=True
            ).stdout
        )
        for mode in ("default", "pad")
    }
    assert faults["pad"] * 10 < faults["default"], faults  # ~2,500 faults without the pad, 0 with it


def test_an_explicit_malloc_setting_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_TOP_PAD_", "0")
    assert keep_heap_top() is False


def test_the_collector_is_settled_once_start_up_is_done() -> None:
    before = gc.get_threshold()
    try:
        settle_garbage_collector()
        assert gc.get_threshold()[0] == GC_FIRST_GENERATION and gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()
        gc.set_threshold(*before)
