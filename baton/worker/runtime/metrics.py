"""Prometheus metrics of one worker, in a registry of its own (tests run several in one process)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from baton.worker.assignment.wire import Roles
from baton.worker.naming import TaskId
from baton.worker.state.restore import RestoreJob

# where a record can fail (the dead-letter header's stage, runtime/producer.py)
DEAD_LETTER_STAGES = ("deserialize", "process", "produce")


class Metrics:
    def __init__(self, application_id: str) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.records_in = Counter(
            "baton_records_consumed", "Input records processed", ["topic", "partition"], registry=r
        )
        self.records_out = Counter(
            "baton_records_produced", "Records produced (sinks, changelogs, DLQ)", registry=r
        )
        self.dlq = Counter(
            "baton_dlq_records", "Records sent to the dead-letter topic", ["stage"], registry=r
        )
        self.late = Counter(
            "baton_late_records_dropped",
            "Records a windowed aggregation dropped: every window they fall in had closed "
            "(stream time past the window's end plus its grace period)",
            ["task"],
            registry=r,
        )
        self.commit_latency = Histogram(
            "baton_commit_latency_seconds",
            "Duration of a commit",
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        self.e2e_latency = Histogram(
            "baton_e2e_latency_seconds",
            "Per task and commit: from the oldest input record's timestamp to the commit that "
            "made its output durable (with exactly-once, visible to read_committed consumers)",
            ["task"],
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800),
        )
        self.busy = Counter(
            "baton_busy_seconds",
            "Seconds the processing loop worked (processing records, committing, punctuating) "
            "rather than waiting in poll for input: its rate is the loop's busy fraction (0..1), "
            "which the operator's autoscaler reads",
            registry=r,
        )
        self.commit_failures = Counter(
            "baton_commit_failures", "Commits that failed and were rolled back", registry=r
        )
        self.restored = Counter(
            "baton_restored_records", "Changelog records applied by restores", ["task", "store"], registry=r
        )
        self.restores_completed = Counter(
            "baton_restores_completed", "Task restores completed", ["task"], registry=r
        )
        self.restore_seconds = Counter(
            "baton_restore_seconds", "Time spent restoring tasks before activation", ["task"], registry=r
        )
        self.restore_remaining = Gauge(
            "baton_restore_remaining_records",
            "Changelog records a restoring store has yet to apply (its changelog end at the "
            "restore's start minus its position); 0 once the task is active",
            ["task", "store"],
            registry=r,
        )
        self.standby_records = Counter(
            "baton_standby_records",
            "Changelog records applied to standby stores",
            ["task", "store"],
            registry=r,
        )
        self.standby_lag = Gauge(
            "baton_standby_lag_records",
            "Changelog end minus a standby store's checkpoint (offsets)",
            ["task", "store"],
            registry=r,
        )
        self.warmup_lag = Gauge(
            "baton_warmup_lag_records",
            "Changelog end minus a warmup store's checkpoint (offsets): a copy the assignor "
            "builds here to move the task's active here once it is within acceptable.recovery.lag",
            ["task", "store"],
            registry=r,
        )
        self.first_record = Histogram(
            "baton_assignment_to_first_record_seconds",
            "From a partition's assignment to its first processed record (restore included)",
            registry=r,
            buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60, 120),
        )
        self.tasks = Gauge(
            "baton_tasks", "Tasks by state (active, restoring, standby, warmup)", ["state"], registry=r
        )
        self.task_starts = Counter(
            "baton_task_starts",
            "Active tasks started here, by how: 'promoted' from a standby or warmup this "
            "member hosted (only the tail is replayed), 'resumed' from a task folder left on this member (the "
            "changelog after its checkpoint), or 'restored' from scratch (the whole changelog)",
            ["kind"],
            registry=r,
        )
        self.rebalances = Counter(
            "baton_rebalances", "Rebalance callbacks (assign, revoke, lost)", ["kind"], registry=r
        )
        self.lag = Gauge(
            "baton_consumer_lag_records", "High watermark minus position", ["topic", "partition"], registry=r
        )
        self.ready = Gauge("baton_ready", "1 when every assigned task is restored and active", registry=r)
        self.info = Gauge("baton_worker_info", "Worker identity", ["application_id"], registry=r)
        self.info.labels(application_id).set(1)
        # Series a rate() or an alert reads exist from the start at 0, not from the first event:
        # an alert on a rate then sees the first dead-lettered record as an increase.
        for stage in DEAD_LETTER_STAGES:
            self.dlq.labels(stage)


class CopyLag:
    """The lag gauges of this member's standby and warmup copies, one series per (task, store).

    A warmup (or an active the leader gave us that its old owner still releases) is reported
    apart from standbys: it is expected to be behind, and the standby lag alert must not
    fire while a new member warms up. A series moves between the two gauges when the copy's
    role changes, and goes when the copy does."""

    def __init__(self, metrics: Metrics, roles: Callable[[], Roles]) -> None:
        self._metrics = metrics
        self._roles = roles
        self._labels: dict[tuple[str, str], Gauge] = {}

    def set(self, job: RestoreJob, lag: int) -> None:
        """Restore thread: never called for a task after ``Restorer.remove`` returned."""
        labels = (str(job.task), job.store_name)
        roles = self._roles()  # swapped whole by the processing thread
        gauge, other = self._metrics.standby_lag, self._metrics.warmup_lag
        if job.task in roles.warmup or job.task in roles.active:
            gauge, other = other, gauge
        if self._labels.get(labels) is other:
            other.remove(*labels)
        self._labels[labels] = gauge
        gauge.labels(*labels).set(lag)

    def prune(self, hosted: Iterable[TaskId]) -> None:
        keep = {str(t) for t in hosted}
        for labels in [x for x in self._labels if x[0] not in keep]:
            self._labels.pop(labels).remove(*labels)
