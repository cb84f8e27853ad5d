"""Whether an app's last compaction Job failed, from its Jobs' conditions (pure).

The Job writes ``status.compaction`` itself, but only when it gets that far: a Job that
cannot start Spark, reach Kafka or the store, or runs past ``activeDeadlineSeconds`` writes
nothing, and ``BatonCompactionStale`` would notice only a day later. So the operator reads
the CronJob's Jobs (labelled ``app.kubernetes.io/component=compactor`` and ``baton.dev/app``)
and reports the newest finished one: a gauge for ``BatonCompactionFailed`` and a Warning
Event on the StreamApp with the Job's own reason (BackoffLimitExceeded, DeadlineExceeded).
Jobs made by hand (``kubectl create job --from=cronjob/...``) count too: they are how a
person retries a failed run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

COMPONENT_LABEL = "app.kubernetes.io/component"
COMPONENT = "compactor"


@dataclass(frozen=True)
class JobResult:
    job: str
    failed: bool
    finished_at: str  # RFC 3339, as the API server writes it
    reason: str
    message: str


def _condition(job: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in (job.get("status") or {}).get("conditions") or []:
        if cond.get("type") == kind and cond.get("status") == "True":
            return dict(cond)
    return None


def result_of(job: dict[str, Any]) -> JobResult | None:
    """A finished Job's outcome; None while it runs (retries included)."""
    name = str(job.get("metadata", {}).get("name", ""))
    failed = _condition(job, "Failed")
    if failed is not None:
        return JobResult(
            name,
            True,
            str(failed.get("lastTransitionTime") or ""),
            str(failed.get("reason") or "Failed"),
            str(failed.get("message") or ""),
        )
    complete = _condition(job, "Complete")
    if complete is not None:
        finished = (job.get("status") or {}).get("completionTime") or complete.get("lastTransitionTime")
        return JobResult(name, False, str(finished or ""), "Complete", "")
    return None


def last_result(jobs: list[dict[str, Any]]) -> JobResult | None:
    """The newest finished Job's outcome (RFC 3339 UTC times sort as strings; ties by name)."""
    finished = [r for r in (result_of(j) for j in jobs) if r is not None]
    return max(finished, key=lambda r: (r.finished_at, r.job), default=None)
