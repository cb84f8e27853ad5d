"""Two click-counter workers of one app, for tests that make one of them misbehave."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from batondev.paths import CLICK_COUNTER

from baton.testing import WorkerProcess, end_offsets, wait_for
from baton.worker.naming import changelog_topic


def two_click_counters(
    bootstrap: str,
    app: str,
    source: str,
    sink: str,
    tmp_path: Path,
    *,
    session_ms: int,
    preludes: tuple[str, str],
) -> tuple[WorkerProcess, WorkerProcess]:
    """ "first" and "second", each with its own state and log under ``tmp_path`` and its prelude
    (``WorkerProcess(prelude=)``); a short session, so a stalled one leaves the group quickly."""
    first, second = (
        WorkerProcess(
            CLICK_COUNTER,
            bootstrap=bootstrap,
            application_id=app,
            state_dir=tmp_path / name,
            log_path=tmp_path / f"{name}.log",
            env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
            extra_args=["-X", f"consumer.session.timeout.ms={session_ms}"],
            prelude=prelude,
        )
        for name, prelude in zip(("first", "second"), preludes, strict=True)
    )
    return first, second


def logged_errors(workers: Iterable[WorkerProcess]) -> str:
    """The error lines the workers logged this run: a failed wait says why a worker stopped."""
    return "\n".join(
        f"{w.log_path.name}: {x.get('msg')}: {x.get('error')}"
        for w in workers
        for x in w.logs()
        if x.get("level") == "error"
    )


def wait_for_changelog_past(bootstrap: str, application_id: str, partitions: int, records: int) -> None:
    """Until every partition of the click counter's changelog ends past ``records``.

    A changelog within ``acceptable.recovery.lag`` makes a member with no copy caught up, so a
    task moved then starts unwarmed: tests that expect a warm start wait for this first."""
    changelog = changelog_topic(application_id, "user-counts-store")

    def past() -> bool:
        ends = end_offsets(bootstrap, changelog)
        return len(ends) == partitions and min(ends.values()) > records

    wait_for(
        f"every partition of {changelog} past {records} records",
        past,
        60,
        every=0.5,
        detail=lambda: str(end_offsets(bootstrap, changelog)),
    )
