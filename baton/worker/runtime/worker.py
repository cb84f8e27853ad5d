"""The worker process: consumer group membership, the processing loop, commits, shutdown.

One thread polls and processes; a second (``restore.py``) restores stores and tails
standby stores; a third serves HTTP; a fourth (``assignment/membership.py``) is this
process's member of the consumer group, where the leader runs Baton's assignor and hands
every member its actives, standbys and warmups. Its rebalance callbacks arrive here as
events on a queue, and the worker hands them to its task manager (``task_manager.py``),
which owns the active tasks and their lifecycle: created when the group assigns their
partitions, restoring until their stores are, active, and closed when their partitions
are revoked (after a commit) or lost (after an abort). A task assigned here while this
member hosts its standby (or warmup) takes the open stores and replays only the tail.

Why one module of this size: ``Worker`` is the processing thread, the one owner of the
consumer and the loop; its methods are the loop's steps and the reactions to the group's
events, in the order the loop runs them. What does not need that state lives in
collaborators: the tasks and their states (``task_manager.py``), client settings
(``clients.py``), topics (``internal_topics.py``), the flip pause (``flip_pause.py``), dead
letters (``dead_letters.py``), task stores and offset sums (``task_stores.py``), lag gauges
(``metrics.py``), standbys and restores (``state/``).
"""

from __future__ import annotations

import logging
import os
import queue
import signal
import threading
import time
from collections.abc import Callable, Sequence
from types import FrameType

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient

from baton.clients.authorization import authorization_error, missing_permission
from baton.control.messages import Color
from baton.worker.assignment.membership import (
    Assigned,
    GroupSettings,
    Lost,
    Membership,
    Rejoining,
    Revoked,
    RolesChanged,
)
from baton.worker.assignment.model import AssignorConfig
from baton.worker.assignment.wire import Roles
from baton.worker.config import ProcessingGuarantee, WorkerConfig
from baton.worker.naming import TaskId, changelog_topic, dlq_topic, internal_topic, source_topics
from baton.worker.runtime import health, internal_topics
from baton.worker.runtime.batching import BatchSizer
from baton.worker.runtime.bluegreen import BlueGreen
from baton.worker.runtime.clients import ClientSettings
from baton.worker.runtime.commit import AtLeastOnce, ExactlyOnce, Guarantee
from baton.worker.runtime.dead_letters import DeadLetters, RecordFailed
from baton.worker.runtime.flip_pause import FlipPause
from baton.worker.runtime.global_tables import GlobalStores
from baton.worker.runtime.memory import keep_heap_top, settle_garbage_collector
from baton.worker.runtime.metrics import CopyLag, Metrics
from baton.worker.runtime.producer import Output
from baton.worker.runtime.purge import RepartitionPurge
from baton.worker.runtime.queries import Answer, Placement, Queries, QueryError, StoreReader, advertised
from baton.worker.runtime.record import Message
from baton.worker.runtime.restore_progress import RestoreProgress
from baton.worker.runtime.store_metrics import StoreMetrics
from baton.worker.runtime.synchronize import synchronized
from baton.worker.runtime.task import Task, run_end
from baton.worker.runtime.task_manager import TaskManager
from baton.worker.runtime.task_stores import TaskStores
from baton.worker.state import snapshot, statedir
from baton.worker.state.restore import RestoreJob, Restorer, Seed
from baton.worker.state.snapshot_uri import S3Settings
from baton.worker.state.standby import StandbyTasks
from baton.worker.state.statedir import process_id
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import CacheBudget
from baton.worker.topology.context import OpenGate, SinkGate
from baton.worker.topology.graph import BuiltTopology
from baton.worker.topology.splice import flip_refusal

log = logging.getLogger("baton.worker")
# How long a worker waits at start for its global tables to load before it gives up (and restarts).
GLOBAL_LOAD_SECONDS = 600.0

__all__ = ["Worker", "process_id"]

CLEANUP_CHECK_SECONDS = 1.0
OFFSETS_REFRESH_SECONDS = 1.0  # how fresh the task offsets this member reports at a rebalance are


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        topology: BuiltTopology,
        gate: SinkGate | None = None,
        before_join: Callable[[], None] | None = None,
        pod_processes: int = 1,
    ) -> None:
        """``before_join``: run right before the group member's first JoinGroup (a supervisor's
        child waits there for the pod's ``pod_processes`` processes)."""
        self.config = config
        self._before_join = before_join
        self._pod_processes = pod_processes
        self.topology = topology
        self.gate: SinkGate = gate or OpenGate()
        self.bluegreen: BlueGreen | None = None  # set in run() when the worker has a color
        self._assignment_version = 0
        self._generation = -1  # the group generation of the assignment in force
        self._flip_refusal = flip_refusal(self.topology)
        self.app = config.application_id
        self.eos = config.processing_guarantee is ProcessingGuarantee.EXACTLY_ONCE_V2
        self.app_dir = config.state_dir / self.app
        self.metrics = Metrics(self.app)
        self.restore_progress = RestoreProgress()  # the restore thread's, through _restore_progress
        self.topic_to_sub = source_topics(topology, self.app)
        self._stop = threading.Event()
        self._failed: BaseException | None = None
        self._joined = False
        self._heartbeat = time.monotonic()
        # set by the commit barrier at rejoin (``_before_rejoin``): no periodic commit is cut until
        # the next assignment is applied, or this monotonic time, whichever comes first
        self._commits_paused_until: float | None = None
        self._commit_pause_limit: float  # half the producer's transaction timeout, set in run()
        self.http_port: int | None = None
        # standbys and warmups: this member's roles from the latest assignment, applied when dirty
        self._roles = Roles()
        self._placement_dirty = False
        self._next_cleanup = 0.0
        # task -> offset sum of its local stores, published for the membership thread's reports
        self._local_offsets: dict[TaskId, int] = {}
        self._next_offsets = 0.0
        self._stateful_subs = frozenset(
            i for i, sub in enumerate(topology.subtopologies) if sub.stores or sub.tables
        )
        self.copy_lag = CopyLag(self.metrics, lambda: self._roles)
        self.stores = TaskStores(self.app, self.app_dir, config.store, topology)
        self.globals = GlobalStores(self.app_dir, config.store, topology.global_tables)
        self.flips: FlipPause | None = None  # set in run() when the worker has a color
        self.cache_budget = CacheBudget(config.cache_max_bytes)  # all tasks' write caches together
        self.queries = Queries()  # interactive queries, answered on this (the processing) thread
        self.store_reader = StoreReader(
            topology, lambda t, internal: internal_topic(self.app, t) if internal else t
        )
        self.endpoint = ""
        self._partition_counts: dict[str, int] = {}

    # -- configuration of the clients ----------------------------------------------------
    def _group_settings(self) -> GroupSettings:
        c = self.config
        return GroupSettings(
            group_id=self.app,
            process=self._ident,
            host=c.host or c.instance_id or self._ident,
            instance_id=c.instance_id,
            topic_to_sub=dict(self.topic_to_sub),
            stateful_subs=self._stateful_subs,
            state_partitions=self.stores.state_partitions,
            assignor=AssignorConfig(
                num_standby_replicas=c.num_standby_replicas,
                acceptable_recovery_lag=c.acceptable_recovery_lag,
                max_warmup_replicas=c.max_warmup_replicas,
            ),
            probing_interval_ms=c.probing_rebalance_interval_ms,
            endpoint=self.endpoint,
            zone=c.zone or "",
            pod_processes=self._pod_processes,
        )

    def _warm_metadata(self) -> None:
        """Make the input topics known to the data consumer before any partition of them is assigned.

        The consumer never subscribes, so it learns of a topic only when one of its partitions
        is first assigned, and librdkafka then fetches its metadata at its next periodic topic
        scan: up to a second in which a task that just moved here cannot fetch (seen in
        bench/scaleout.py as 0.4-0.8 s before a newcomer's first records, with debug=metadata
        showing "metadata information unknown" that long after the assign). Asking for the
        metadata once here removes that wait.
        """
        for topic in sorted(self.topic_to_sub):
            try:
                self.consumer.list_topics(topic, timeout=10)
            except KafkaException as exc:  # not fatal: the assign finds the metadata itself, only later
                log.warning("topic metadata not read", extra={"topic": topic, "error": str(exc)})

    # -- lifecycle ---------------------------------------------------------------------------
    def run(self) -> int:
        """Run until SIGTERM/SIGINT or a fatal error; returns the process exit code."""
        keep_heap_top()
        try:
            self._lock_fd = statedir.lock(self.app_dir)
        except statedir.StateDirLocked as exc:
            log.error("cannot start", extra={"error": str(exc)})
            return 1
        self._ident = self.config.instance_id or process_id(self.app_dir)
        self._install_signals()
        server = health.serve(
            self.config.metrics_port, self.metrics.registry, self._healthy, self._is_ready, self.queries.ask
        )
        self.http_port = server.server_address[1]
        self.endpoint = advertised(self.config.application_server, self.http_port)
        log.info("http listening", extra={"port": self.http_port, "endpoint": self.endpoint})
        self.clients = ClientSettings(self.config, self._ident)
        admin = AdminClient(self.clients.base())
        internal_topics.create_for(
            admin,
            self.topology,
            self.app,
            self.topic_to_sub,
            self.config.replication_factor,
        )
        if self.config.color is not None:
            self._start_bluegreen()
        self.topics = internal_topics.TopicFacts(admin)
        self.purge = RepartitionPurge(
            admin,
            {internal_topic(self.app, t) for t in self.topology.repartition_topics},
            self.config.repartition_purge_interval_ms,
        )
        changelogs = {changelog_topic(self.app, s.name) for s in self.topology.stores()}
        producer = self.clients.producer()
        # a pause past the transaction timeout would have the broker abort the open transaction
        self._commit_pause_limit = float(producer.get("transaction.timeout.ms", 60_000)) / 2000
        self.output = Output(producer, changelogs, size_limit=self.topics.size_limit)
        self.consumer = Consumer(self.clients.consumer())
        self._warm_metadata()
        self.dead_letter = DeadLetters(
            self.config.error_handler, dlq_topic(self.app), self.output.send, self.metrics
        )
        self.membership = Membership(
            self._group_settings(),
            self.clients.membership(),
            offsets=lambda: self._local_offsets,
            end_offsets=self.topics.end_offsets,
            before_join=self._before_join,
            last_progress=lambda: self._heartbeat,
            commit_before_rejoin=self.eos,
        )
        self.guarantee: Guarantee = (ExactlyOnce if self.eos else AtLeastOnce)(self.output, self.membership)
        self.guarantee.start()
        self.restorer = Restorer(
            self.clients.consumer(),
            self._restore_progress,
            seed=self._snapshot_seed(),
            on_lag=self.copy_lag.set,
            actives_starting=self._actives_starting,
        )
        self.restorer.start()
        if self.globals.tables:  # before joining the group: a task never sees a half-loaded global table
            topics = [t.store.source_topic or "" for t in self.globals.tables]
            self.globals.bootstrap(
                self.restorer,
                internal_topics.partition_counts(admin, topics, timeout=60),
                self._stop,
                timeout=GLOBAL_LOAD_SECONDS,
            )
        self.standbys = StandbyTasks(
            app_dir=self.app_dir,
            restorer=self.restorer,
            open_stores=self.stores.open,
            jobs_for=self.stores.restore_jobs,
            cleanup_delay=self.config.state_cleanup_delay_ms / 1000,
            on_change=self._update_task_gauges,
        )
        self.task_manager = TaskManager(
            consumer=self.consumer,
            topic_to_sub=self.topic_to_sub,
            build=self._build_task,
            open_stores=self.stores.open,
            jobs_for=self.stores.restore_jobs,
            restorer=self.restorer,
            standbys=self.standbys,
            commit=self._commit,
            abort=self.guarantee.abort,
            metrics=self.metrics,
            copy_lag=self.copy_lag,
            on_change=self._update_task_gauges,
        )
        self.metrics.registry.register(StoreMetrics(self._open_stores))
        if self.bluegreen is not None:
            internal = {f"{self.app}-{t}" for t in self.topology.repartition_topics}
            self.flips = FlipPause(
                self.bluegreen,
                self.consumer,
                self._commit,
                self.task_manager.tasks,
                sorted(t for t in self.topic_to_sub if t not in internal),
                self._flip_refusal,
                self.task_manager.held,
            )
        self._local_offsets = self._collect_offsets()
        self._heartbeat = time.monotonic()  # liveness counts from here, not from the set-up above
        if self.bluegreen is not None:  # a Pod marked to go before it (re)started says so at its first join
            self.membership.drain(self.bluegreen.gate.draining)
        self.membership.start()
        self.membership.wait_started()
        log.info(
            "worker started",
            extra={
                "guarantee": self.config.processing_guarantee.value,
                "instance": self._ident,
                "topics": sorted(self.topic_to_sub),
                "num_standby_replicas": self.config.num_standby_replicas,
            },
        )
        code = 0
        settle_garbage_collector()
        try:
            self._loop()
        except BaseException as exc:
            self._failed = exc
            refused = authorization_error(exc)
            if refused is not None:  # a missing ACL: the grant to add, not a traceback
                log.error("worker failed", extra={"error": missing_permission(refused, self.app)})
            else:
                log.error(
                    "worker failed", exc_info=not isinstance(exc, RecordFailed), extra={"error": str(exc)}
                )
            code = 1
        finally:
            self._shutdown()
            server.shutdown()
        return code

    def _snapshot_seed(self) -> Seed | None:
        """Stores restoring from scratch start from the compactor's newest snapshot, if configured."""
        if not self.config.snapshot_store:
            return None
        return snapshot.seeder(
            self.config.snapshot_store,
            self.app,
            lambda store: changelog_topic(self.app, store),
            lambda topic: self.topics.setting(topic, "delete.retention.ms"),
            topic_id=self.topics.topic_id,
            s3=S3Settings(self.config.snapshot_s3_endpoint, self.config.snapshot_s3_region),
        )

    def _install_signals(self) -> None:
        def stop(signum: int, _frame: FrameType | None) -> None:
            log.info("signal received, stopping", extra={"signal": signal.Signals(signum).name})
            self._stop.set()

        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, stop)
            signal.signal(signal.SIGINT, stop)

    def stop(self) -> None:
        self._stop.set()

    def _start_bluegreen(self) -> None:
        color: Color = "green" if self.config.color == "green" else "blue"
        control = self.config.control_topic or f"{self.app.removesuffix('-' + color)}-control"
        self.bluegreen = BlueGreen(
            self.config.bootstrap_servers, control, color, self._ident, self.clients.shared()
        )
        self.bluegreen.start()
        self.gate = self.bluegreen

    def _shutdown(self) -> None:
        grace = self.config.shutdown_grace_seconds
        watchdog = threading.Timer(grace, _hard_exit, args=(grace,))
        watchdog.daemon = True
        watchdog.start()
        try:
            if self._failed is None:
                self._commit()
            else:
                self.guarantee.abort()
            self.membership.stop()  # a static member does not leave: a restart within the session keeps its tasks
            self.task_manager.close_all()
            self.consumer.close()
            self.membership.join(10)
            self.output.producer.flush(max(1.0, grace / 2))
        except Exception:
            log.exception("unclean shutdown")
        finally:
            try:
                self.standbys.close()
            except Exception:
                log.exception("closing standbys failed")
            self.restorer.stop()
            self.restorer.join(5)
            self.globals.close()
            if self.bluegreen is not None:
                self.bluegreen.close()
            self.guarantee.close()
            watchdog.cancel()
            log.info("worker stopped", extra={"produced": self.output.sent})

    # -- the loop --------------------------------------------------------------------------
    def _loop(self) -> None:
        interval = self.config.effective_commit_interval_ms / 1000
        next_commit = time.monotonic() + interval
        consume = self.consumer.consume
        manager = self.task_manager
        active, held, awaiting_first = manager.active, manager.held, manager.awaiting_first
        metrics_in = self.metrics.records_in
        bg = self.bluegreen
        flips = self.flips
        sizer = BatchSizer()
        wall_clock = any(sub.custom for sub in self.topology.subtopologies)  # punctuators may tick
        # baton_busy_seconds (the operator's autoscaler reads its rate): the loop works from the
        # end of one poll to the start of the next, so one clock read per poll (not per record)
        # joins the one the batch sizer makes; a flip's pause counts as waiting, not working
        busy = self.metrics.busy.inc
        working_since = time.monotonic()
        while not self._stop.is_set():
            self._heartbeat = time.monotonic()
            if self.guarantee.unsettled:
                self._settle()
            self._membership_step()
            self.queries.answer(self._answer_query)
            if flips is not None:
                flips.step(self._assignment_version, self._generation)
                self.membership.drain(flips.bg.gate.draining)
                if held:
                    flips.release_held(active)
                if flips.paused:
                    busy(time.monotonic() - working_since)
                    flips.bg.wait(0.01)  # paused for a flip: only the control topic moves
                    working_since = time.monotonic()
                    continue
            holding = bg is not None and bg.holding()
            busy(time.monotonic() - working_since)
            messages = consume(num_messages=sizer.size, timeout=0.05)
            working_since = round_started = time.monotonic()
            counts = self._dispatch(messages, holding)
            if messages:
                sizer.observe(len(messages), time.monotonic() - round_started)
            for (topic, partition), n in counts.items():
                metrics_in.labels(topic, str(partition)).inc(n)
            if awaiting_first and counts:
                manager.first_records(counts)
            if wall_clock:
                now_ms = int(time.time() * 1000)
                for task in manager.running():
                    task.punctuate_wall_clock(now_ms)
            manager.activate_ready()
            self._standby_step()
            if self.restorer.error is not None:
                raise RuntimeError("restore failed") from self.restorer.error
            if time.monotonic() >= next_commit:
                next_commit = self._periodic_commit(next_commit, interval)
            if self.output.hold is None:  # in flight, the committer thread serves the reports
                self.output.producer.poll(0)

    def _periodic_commit(self, due: float, interval: float) -> float:
        """The commit due at ``due``; returns when the next one is due.

        A periodic commit due while the one before still waits on the broker does not wait
        for it: the loop goes on processing and commits at its first turn after that one is
        done (commit.py, "Pipelined exactly-once commits"), so ``due`` stays as it was. Nor
        is one cut while the member rejoins (``_before_rejoin``): it stays due until the next
        assignment is applied. A rejoin that outlasts the pause (a member slow to rejoin or
        leave holds the whole group: 35 s in a scale-in on the node) gets one commit per
        pause, which keeps the open transaction under its timeout, not the periodic commits
        back: one of those is nearly always in flight when the generation moves, and is
        refused (bench/autoscale.py counted 1-2 aborts a member and a scale-in that way).
        """
        if self._commits_paused_until is not None:
            now = time.monotonic()
            if now < self._commits_paused_until:
                return due
            self._commits_paused_until = now + self._commit_pause_limit
            log.warning(
                "no assignment since rejoining; committing once before the transaction times out",
                extra={"seconds": self._commit_pause_limit},
            )
        if self.guarantee.unsettled:
            self._settle()
        if self.guarantee.unsettled:
            return due
        self._commit(pipelined=True)
        return time.monotonic() + interval

    def _dispatch(
        self, messages: Sequence[Message], holding: bool
    ) -> dict[tuple[str | None, int | None], int]:
        """Hand each run of one partition's records to its task; returns records processed per partition.

        ``consume()`` returns runs of one partition's records, and a task takes a whole run
        (``Task.process_run``): the task is looked up, and its records counted, once per run.
        While a flip holds partitions, records go one by one, since any of them may be
        where the hold begins.
        """
        counts: dict[tuple[str | None, int | None], int] = {}
        active, held = self.task_manager.active, self.task_manager.held
        # tasks with several inputs: their runs, per partition, taken in timestamp order below
        several: dict[int, tuple[Task, dict[tuple[str | None, int | None], list[tuple[int, int]]]]] = {}
        i, total = 0, len(messages)
        while i < total:
            msg = messages[i]
            err = msg.error()
            if err is not None:
                self._consumer_error(err)
                i += 1
                continue
            tp = (msg.topic(), msg.partition())
            task = active.get(tp)
            if task is None or tp in held:  # revoked within this poll, not restored yet, or held for a flip
                i = run_end(messages, i)
                continue
            if holding:
                end = run_end(messages, i)
                done = self._process_holding(task, messages, i, end)
            elif len(task.input_topics) > 1:
                end = run_end(messages, i)
                several.setdefault(id(task), (task, {}))[1].setdefault(tp, []).append((i, end))
                done = 0
            else:
                end = task.process_run(messages, i)
                done = end - i
            if done:
                counts[tp] = counts.get(tp, 0) + done
            i = end
        for task, runs in several.values():
            self._process_synchronized(task, messages, runs, counts)
        return counts

    @staticmethod
    def _process_synchronized(
        task: Task,
        messages: Sequence[Message],
        runs: dict[tuple[str | None, int | None], list[tuple[int, int]]],
        counts: dict[tuple[str | None, int | None], int],
    ) -> None:
        """A task's runs of several partitions, smallest timestamp first (``synchronize.py``)."""
        for start, stop in synchronized(list(runs.values()), lambda k: messages[k].timestamp()[1]):
            done = task.process_run(messages, start, stop) - start
            tp = (messages[start].topic(), messages[start].partition())
            counts[tp] = counts.get(tp, 0) + done

    def _process_holding(self, task: Task, messages: Sequence[Message], start: int, end: int) -> int:
        """The run ``messages[start:end]`` while a flip holds: stop at the record the hold
        begins at; returns records processed."""
        bg, flips = self.bluegreen, self.flips
        assert bg is not None and flips is not None
        for k in range(start, end):
            msg = messages[k]
            at, offset = (msg.topic() or "", msg.partition() or 0), msg.offset() or 0
            if bg.held(at, offset):
                # held from this record on: hold() seeks back here, so the rest of this run
                # must be neither processed nor held again (a later seek would skip the
                # records in between)
                flips.hold(at[0], at[1], offset)
                return k - start
            task.process_run(messages, k, k + 1)
        return end - start

    def _answer_query(self, path: str, params: dict[str, str]) -> Answer:
        where = Placement(
            me=self.endpoint,
            tasks={task.id: task for task in self.task_manager.running()},
            endpoints=self._roles.endpoints,
            partitions=self._partitions_of,
            restoring=self.task_manager.restoring(),
        )
        return self.store_reader.answer(path, params, where)

    def _partitions_of(self, topic: str) -> int:
        if topic not in self._partition_counts:
            meta = self.consumer.list_topics(topic, timeout=10).topics[topic]
            if meta.error is not None or not meta.partitions:
                raise QueryError(503, f"topic {topic} has no metadata yet")
            self._partition_counts[topic] = len(meta.partitions)
        return self._partition_counts[topic]

    # -- membership events, standbys and warmups ----------------------------------------------
    def _membership_step(self) -> None:
        """Apply what the membership thread heard from the group, in order."""
        if self.membership.failed is not None:
            raise RuntimeError("group membership failed") from self.membership.failed
        while True:
            try:
                event = self.membership.events.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, RolesChanged):
                self._roles_changed(event)
            elif isinstance(event, Assigned):
                self._on_assign(event.partitions)
            elif isinstance(event, Revoked):
                try:
                    self._on_revoke(event.partitions)
                finally:
                    event.done.set()
            elif isinstance(event, Lost):
                self._on_lost(event.partitions)
            elif isinstance(event, Rejoining):
                try:
                    self._before_rejoin(event)
                finally:
                    event.done.set()

    def _before_rejoin(self, event: Rejoining) -> None:
        """The commit barrier at rejoin (exactly-once; docs/architecture.md): the membership is
        about to send its JoinGroup, and the group keeps the held generation until it has. What
        was processed is committed under it now, the JoinGroup waiting for it, and no periodic
        commit is cut until the next assignment is applied: cut meanwhile, it would name a
        generation the join may end at any moment, and be refused with its whole transaction.

        The pause is bounded by half the transaction timeout: a rebalance that waits longer
        (a static member's session running out) must not have the broker abort the open
        transaction: then one commit per pause keeps it open (``_periodic_commit``), each
        risking the refusal, as every commit did before."""
        self._commits_paused_until = time.monotonic() + self._commit_pause_limit
        if event.commit and not event.abandoned.is_set() and self._failed is None:
            self._commit()

    def _roles_changed(self, event: RolesChanged) -> None:
        roles = event.roles
        self._joined = True
        self.task_manager.expect(event.owned)  # ready only once these are tasks here (Assigned follows)
        self._roles = roles
        self._placement_dirty = True
        self._assignment_version += 1  # a flip in preparation must report for this generation
        self._generation = event.generation
        self.membership.applied(event)
        self._commits_paused_until = None  # commits name this generation from now on
        log.info(
            "assignment received",
            extra={
                "generation": event.generation,
                "active": sorted(map(str, roles.active)),
                "standby": sorted(map(str, roles.standby)),
                "warmup": sorted(map(str, roles.warmup)),
            },
        )
        self._update_task_gauges()

    def _standby_step(self) -> None:
        if self._placement_dirty:
            self._placement_dirty = False
            # an active the leader gave us that another member still releases (cooperative staging)
            # stays warm as a standby until its partitions arrive
            wanted = self._roles.standby | self._roles.warmup | self._roles.active
            desired = {t for t in wanted if t.subtopology in self._stateful_subs}
            self.standbys.update(desired, set(self.task_manager.tasks))
            self.copy_lag.prune(self.standbys.hosted)
            self._update_task_gauges()
        now = time.monotonic()
        if now >= self._next_cleanup:
            self._next_cleanup = now + CLEANUP_CHECK_SECONDS
            self.standbys.cleanup(set(self.task_manager.tasks) | set(self.standbys.hosted))
        if now >= self._next_offsets:
            self._next_offsets = now + OFFSETS_REFRESH_SECONDS
            self._local_offsets = self._collect_offsets()

    def _collect_offsets(self) -> dict[TaskId, int]:
        open_stores = self.task_manager.local_stores()
        open_stores.update({t: h.stores for t, h in self.standbys.hosted.items()})
        return self.stores.offset_sums(open_stores)

    def _actives_starting(self) -> bool:
        """Restore thread: an active task here still awaits its first record (``TaskManager.actives_starting``)."""
        manager = getattr(self, "task_manager", None)  # the restore thread starts before the tasks' manager
        return manager is not None and manager.actives_starting()

    def _consumer_error(self, err: KafkaError) -> None:
        if err.fatal():
            raise KafkaException(err)
        log.warning("consumer error", extra={"error": str(err)})

    def _commit(self, pipelined: bool = False) -> None:
        """Commit every active task; ``pipelined`` (the loop's periodic commit) may return
        while an exactly-once commit still waits on the broker (``commit.py``, "Pipelined").
        Any other returns once every commit is done: its callers (a revocation, a flip,
        shutdown) close tasks or write markers next."""
        if not pipelined and self.guarantee.unsettled:
            self._settle(wait=True)  # the pipelined one before, though nothing came after it
        tasks = self.task_manager.running()
        if not any(t.processed_since_commit for t in tasks) and not self.output.changelog_offsets:
            self._offer_purge(tasks)  # a purge lost or failed earlier does not wait for new input
            return
        started = time.monotonic()
        drains = self._drains_due(tasks)
        if drains and self.eos:  # in the same transaction as the last outputs below the cut
            for key, value in drains:
                self.output.send(self.bluegreen.topic, key, value, 0, int(time.time() * 1000), None)  # type: ignore[union-attr]
        # a flip's drain markers count as written only once their commit is done
        ok = self.guarantee.commit(tasks, wait=not pipelined or bool(drains))
        self.metrics.commit_latency.observe(time.monotonic() - started)
        if not ok:
            self.metrics.commit_failures.inc()
            self.task_manager.rewind(tasks)
        else:
            self._offer_purge(tasks)
            if drains:
                assert self.bluegreen is not None
                if not self.eos:
                    self.bluegreen.write_now(drains)
                self.bluegreen.drains_committed(drains)
        self._update_lag()

    def _offer_purge(self, tasks: list[Task]) -> None:
        """The tasks' committed offsets to the repartition purge (it sends what moved or failed)."""
        if self.purge.enabled:
            self.purge.after_commit(
                (t, task.partition, o) for task in tasks for t, o in task.committed.items()
            )

    def _settle(self, wait: bool = False) -> None:
        """Finish a pipelined commit that is done (or wait for it), and redo work if one failed."""
        if self.guarantee.settle(wait) is False:
            self.metrics.commit_failures.inc()
            self.task_manager.rewind(self.task_manager.running())

    def _drains_due(self, tasks: list[Task]) -> list[tuple[bytes, bytes]]:
        if self.bluegreen is None or not self.bluegreen.gate.state.pending:
            return []
        positions = {(t, task.partition): pos for task in tasks for t, pos in task.positions.items()}
        return self.bluegreen.drains_due(positions)

    def _update_lag(self) -> None:
        for (topic, partition), task in self.task_manager.active.items():
            if topic is None or partition is None:
                continue
            position = task.positions.get(topic)
            if position is None or position < 0:
                continue
            try:
                _low, high = self.consumer.get_watermark_offsets(
                    TopicPartition(topic, partition), cached=True
                )
            except KafkaException:
                continue
            if high >= 0:
                self.metrics.lag.labels(topic, str(partition)).set(max(0, high - position))

    # -- tasks and rebalances (task_manager.py keeps the tasks; these are the worker's part) ---------
    def _on_assign(self, assigned: list[tuple[str, int]]) -> None:
        self.metrics.rebalances.labels("assign").inc()
        log.info("rebalance: assign", extra={"partitions": assigned})
        self._joined = True
        self._assignment_version += 1  # a flip in preparation must report the new partitions too
        self._placement_dirty = True
        if not assigned:
            return
        if self.bluegreen is not None:
            # the previous owner may have paused and reported for a flip this worker has not read
            # yet: see every control record written so far before emitting anything for them
            self.bluegreen.catch_up()
        self.task_manager.assign(assigned)

    def _open_stores(self) -> list[tuple[str, str, str, KeyValueStore]]:
        """Every store open here, for the metrics server's thread: it copies each map the
        processing thread changes in one C-level step (``list``) before walking it."""
        out = [("global", name, "global", store) for name, store in list(self.globals.stores.items())]
        restoring = self.task_manager.restoring()
        for task in list(self.task_manager.tasks.values()):
            role = "restoring" if task.id in restoring else "active"
            out += [(str(task.id), name, role, store) for name, store in list(task.persistent.items())]
        warmups = self._roles.warmup
        for task_id, hosted in list(self.standbys.hosted.items()):
            role = "warmup" if task_id in warmups else "standby"
            out += [(str(task_id), name, role, store) for name, store in list(hosted.stores.items())]
        return out

    def _build_task(self, task_id: TaskId, stores: dict[str, KeyValueStore]) -> Task:
        """A task of this worker's topology over ``stores``, writing through this worker's producer."""
        return Task(
            task_id,
            self.topology.subtopologies[task_id.subtopology],
            application_id=self.app,
            stores=stores,
            send=self.output.send,
            send_covered=self.output.send_covered,
            gate=self.gate,
            caching=self.config.write_cache,
            dead_letter=self.dead_letter,
            cache_budget=self.cache_budget,
            on_late=self.metrics.late.labels(str(task_id)).inc,
            global_stores=self.globals.stores,
            on_latency=self.metrics.e2e_latency.labels(str(task_id)).observe,
        )

    def _restore_progress(self, job: RestoreJob, count: int) -> None:
        if job.standby:
            self.metrics.standby_records.labels(str(job.task), job.store_name).inc(count)
        elif not job.done:
            task, store = str(job.task), job.store_name
            self.metrics.restored.labels(task, store).inc(count)
            remaining = max(0, job.end - job.position) if job.position >= 0 else max(0, job.end - job.start)
            self.metrics.restore_remaining.labels(task, store).set(remaining)
            line = self.restore_progress.update(task, store, job.start, count, remaining)
            if line is not None:
                log.info("restore progress", extra=line)

    def _on_revoke(self, partitions: list[tuple[str, int]]) -> None:
        """Commit, then close the revoked tasks: the membership rejoins, and the next owner starts, after this."""
        self.metrics.rebalances.labels("revoke").inc()
        log.info("rebalance: revoke", extra={"partitions": partitions})
        self._placement_dirty = True
        self._assignment_version += 1
        self.task_manager.revoke(partitions, commit=self._failed is None)

    def _on_lost(self, partitions: list[tuple[str, int]]) -> None:
        """Partitions lost without a clean revoke: their uncommitted work must not be committed by us."""
        self.metrics.rebalances.labels("lost").inc()
        log.warning("partitions lost", extra={"partitions": partitions})
        self._placement_dirty = True
        self._assignment_version += 1
        self.task_manager.lose(partitions)

    # -- health ----------------------------------------------------------------------------------
    def _update_task_gauges(self) -> None:
        restoring = len(self.task_manager.restoring())
        self.metrics.tasks.labels("restoring").set(restoring)
        self.metrics.tasks.labels("active").set(len(self.task_manager.tasks) - restoring)
        standbys = getattr(self, "standbys", None)
        hosted = set(standbys.hosted) if standbys is not None else set()
        warmups = hosted & self._roles.warmup
        self.metrics.tasks.labels("standby").set(len(hosted - warmups))
        self.metrics.tasks.labels("warmup").set(len(warmups))
        self.metrics.ready.set(1 if self._is_ready() else 0)

    def _healthy(self) -> bool:
        membership = getattr(self, "membership", None)
        if membership is not None and membership.left_for_stall:
            return False  # out of the group: the processing thread is stuck past max.poll.interval.ms
        return time.monotonic() - self._heartbeat < max(
            30.0, 3 * self.config.effective_commit_interval_ms / 1000
        )

    def _is_ready(self) -> bool:
        """Joined, every partition of the latest assignment applied, and every task restored."""
        return (
            self._joined  # the tasks' manager exists by then
            and self.task_manager.applied()
            and self._failed is None
            and not self._stop.is_set()
        )


def _hard_exit(grace: float) -> None:
    logging.getLogger("baton.worker").error(
        "shutdown exceeded the grace period; exiting", extra={"grace_seconds": grace}
    )
    logging.shutdown()
    os._exit(1)
