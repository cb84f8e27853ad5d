"""Group membership with Baton's assignor, in a thread of its own (kafka-python).

confluent-kafka (librdkafka) cannot run a custom assignor, and Baton must decide actives,
standbys and warmups together on the group leader (see ``assignor.py``). So membership
runs in kafka-python, a well-kept client whose classic consumer group implementation
takes custom assignors, static membership (``group_instance_id``) and the cooperative
rebalance protocol (KIP-429). It only does membership: every partition it is given
is paused (records it may fetch before that are dropped), and records flow through
confluent-kafka with ``assign()`` on the processing thread.

What crosses threads, and why it is safe:

* rebalance callbacks run on kafka-python's I/O thread and become ``Event`` values on
  a queue that the processing thread drains. A revocation waits (bounded) until the
  processing thread has committed and closed the revoked tasks, so the member rejoins,
  and the next owner starts, only after our last transaction for them is resolved;
* exactly-once fencing stays the broker's: transactional offset commits carry this
  membership's generation and member id (``wire.librdkafka_group_metadata``), so a
  zombie whose tasks moved fails its commit and aborts;
* under exactly-once, a member that holds tasks commits before its JoinGroup: the
  ``Rejoining`` event asks the processing thread to commit under the current generation
  (which the broker keeps until this member has joined) and to cut no commit until the
  next assignment is applied, and the JoinGroup waits for that commit (bounded). A commit
  in flight when the generation moved used to be refused and its transaction aborted
  (docs/architecture.md, "The commit barrier at rejoin");
* at-least-once offset commits carry the same identity: they go through this client,
  executed on its thread between polls.

The leader's assignment, which needs none of the member's state, is ``leader.py``'s. Why
the rest is one module of this size: the member thread, its rebalance listener and the
assignor adapter share one kafka-python consumer and the member's state (generation, owned
partitions, pending revocations); split apart, each would reach into the others.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer
from kafka.admin import MemberToRemove
from kafka.consumer.subscription_state import ConsumerRebalanceListener
from kafka.coordinator.assignors.abstract import AbstractPartitionAssignor, RebalanceProtocol
from kafka.errors import NoError
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment, ConsumerProtocolSubscription
from kafka.structs import MemberState, OffsetAndMetadata
from kafka.structs import TopicPartition as KTopicPartition

from baton.clients.kafka_python import admin_config
from baton.worker.assignment.fencing import Identity, commit_identity, membership_ended, refused_before_send
from baton.worker.assignment.leader import FOLLOWUP_SECONDS, lags_from, leader_assignment
from baton.worker.assignment.model import AssignorConfig
from baton.worker.assignment.wire import RUNNING, BadUserData, Roles, Subscription, librdkafka_group_metadata
from baton.worker.naming import TaskId, tasks_for

log = logging.getLogger("baton.worker.membership")

__all__ = [  # lags_from is leader.py's, importable from here as before
    "TP",
    "Assigned",
    "Event",
    "GroupSettings",
    "Lost",
    "Membership",
    "Rejoining",
    "Revoked",
    "RolesChanged",
    "StaleCommit",
    "TaskAssignor",
    "lags_from",
]

TP = tuple[str, int]
REVOKE_WAIT_SECONDS = 60.0  # a revocation waits this long for the processing thread's commit
# a JoinGroup waits this long at most for the commit before it (a third of the session at most:
# kafka-python sends no heartbeat meanwhile, and the broker waits for no JoinGroup of ours yet)
REJOIN_COMMIT_WAIT_SECONDS = 5.0
FIRST_FOLLOWUP_SECONDS = 0.05  # the first time: the receiver rejoins at once (see assignment_received)
ENDS_REFRESH_SECONDS = 2.0  # how stale the changelog ends behind the leader's lags may be


class StaleCommit(RuntimeError):
    """An at-least-once commit made under an identity the group has moved past: not sent."""


@dataclass(frozen=True)
class Assigned:
    partitions: list[TP]


@dataclass(frozen=True)
class Revoked:
    partitions: list[TP]
    done: threading.Event = field(default_factory=threading.Event, compare=False)


@dataclass(frozen=True)
class Rejoining:
    """This member is about to send its JoinGroup: commit now, then cut no commit until the
    next ``RolesChanged`` (the processing thread's part of the commit barrier at rejoin).

    ``commit`` is False when the generation has already moved past the held assignment's (a
    rejoin after a failed SyncGroup): a commit would be refused, so only the pause holds.
    ``done`` is set by the processing thread once its commit has ended; ``abandoned`` by the
    membership thread when it stopped waiting and joined anyway, too late to commit.
    """

    commit: bool
    done: threading.Event = field(default_factory=threading.Event, compare=False)
    abandoned: threading.Event = field(default_factory=threading.Event, compare=False)


@dataclass(frozen=True)
class Lost:
    partitions: list[TP]


@dataclass(frozen=True)
class RolesChanged:
    generation: int
    roles: Roles
    owned: frozenset[TP] = frozenset()  # the partitions this assignment leaves the member (Assigned follows)
    member: str = ""  # the member id it came under: the processing thread hands it back (Membership.applied)


Event = Assigned | Revoked | Lost | RolesChanged | Rejoining


@dataclass(frozen=True)
class GroupSettings:
    """What the membership needs to know about the app (the same on every member)."""

    group_id: str
    process: str  # group.instance.id, or the process id kept in state.dir
    host: str  # the pod: standbys avoid a task's active pod
    instance_id: str | None
    topic_to_sub: Mapping[str, int]
    stateful_subs: frozenset[int]
    state_partitions: Callable[
        [TaskId], list[TP]
    ]  # changelog (or table source) partitions of a task's stores
    assignor: AssignorConfig
    probing_interval_ms: int
    endpoint: str = ""  # where this member's HTTP server answers interactive queries
    zone: str = ""  # the member's failure domain (rack-aware standbys)
    pod_processes: int = 1  # the processes of this member's pod (processes/join.py), this one included


class TaskAssignor(AbstractPartitionAssignor):  # type: ignore[misc]
    """kafka-python's hook for the leader's assignment: Baton's assignor plus cooperative staging."""

    name = "baton"
    version = 1  # ConsumerProtocolSubscription v1: owned partitions, for tools that read them

    def __init__(self, membership: Membership) -> None:
        self._m = membership

    def supported_protocols(self) -> list[RebalanceProtocol]:
        return [RebalanceProtocol.COOPERATIVE]

    def metadata(self, topics: Collection[str]) -> ConsumerProtocolSubscription:
        return self._m.subscription_metadata(topics)

    def assign(self, cluster: Any, members: list[Any]) -> dict[str, ConsumerProtocolAssignment]:
        return self._m.leader_assign(cluster, members)

    def on_assignment(self, assignment: ConsumerProtocolAssignment, generation: int) -> None:
        self._m.assignment_received(assignment, generation)


def _live(meta: Any) -> Identity:
    """The identity kafka-python's client has now (its ``group_metadata()``)."""
    return Identity(int(meta.generation_id), str(meta.member_id or ""))


def _stable_at(consumer: KafkaConsumer, generation: int) -> bool:
    """Whether the member is in a stable group at ``generation`` (not rejoining, nothing newer)."""
    meta = consumer.group_metadata()
    return bool(meta.state == MemberState.STABLE and int(meta.generation_id) == generation)


def _keep_finished_joins(coordinator: Any) -> None:
    """Have kafka-python apply a JoinGroup/SyncGroup round that ended after the poll that
    drove it stopped waiting, instead of dropping it and sending another JoinGroup.

    kafka-python (3.0.12) runs the round as a task; a poll whose timeout expires leaves it in
    flight for the next poll to await. A round that ends between two polls, though, is taken
    for one never started: the next poll sends a new JoinGroup and drops the assignment the
    broker has handed out. From the leader that JoinGroup starts another rebalance, which the
    members already synced into the generation hear of only at their next heartbeat: a
    pod's second process idled for that heartbeat (10 s in tests/integration/
    test_processes_per_pod.py, 2 of 3 full-suite runs, whose load makes the rounds straddle
    ``poll``'s 100 ms). So the round's assignment is kept until the coordinator applies it,
    and the next round returns it at once, unless something since asked for a fresh join (a
    ``request_rejoin``, or a reset generation: then it rejoins as before).
    """
    names = ("_do_join_and_sync_async", "_on_join_complete_async", "request_rejoin", "_generation")
    if not all(hasattr(coordinator, name) for name in names):  # another kafka-python than 3.0.12's
        log.warning("kafka-python's join internals changed: a join that ends between polls may be redone")
        return
    run_round = coordinator._do_join_and_sync_async
    complete = coordinator._on_join_complete_async
    request_rejoin = coordinator.request_rejoin
    ended: list[tuple[Any, Any]] = []  # (generation, assignment) of a round not applied yet

    async def join_and_sync() -> Any:
        if ended:
            generation, assignment = ended.pop()
            if generation is coordinator._generation:
                log.info(
                    "applying the join that ended after the poll stopped waiting for it",
                    extra={"generation": generation.generation_id},
                )
                return assignment
        assignment = await run_round()
        ended[:] = [(coordinator._generation, assignment)]
        return assignment

    async def join_complete(*args: Any, **kwargs: Any) -> Any:
        ended.clear()
        return await complete(*args, **kwargs)

    def rejoin_requested() -> None:
        ended.clear()
        request_rejoin()

    coordinator._do_join_and_sync_async = join_and_sync
    coordinator._on_join_complete_async = join_complete
    coordinator.request_rejoin = rejoin_requested


def _log_failed_commit(offsets: object, response: object) -> None:
    if isinstance(response, Exception):
        log.warning("offset commit at revocation failed", extra={"error": str(response)})


class _Listener(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, membership: Membership) -> None:
        self._m = membership

    def on_partitions_revoked(self, revoked: Collection[KTopicPartition]) -> None:
        self._m.partitions_revoked(revoked)

    def on_partitions_assigned(self, assigned: Collection[KTopicPartition]) -> None:
        self._m.partitions_assigned(assigned)

    def on_partitions_lost(self, lost: Collection[KTopicPartition]) -> None:
        self._m.partitions_lost(lost)


class Membership(threading.Thread):
    """One member of the app's consumer group; the processing thread reads ``events``."""

    def __init__(
        self,
        settings: GroupSettings,
        client_config: dict[str, Any],
        offsets: Callable[[], Mapping[TaskId, int]],
        end_offsets: Callable[[list[TP]], dict[TP, int] | None],
        before_join: Callable[[], None] | None = None,
        *,
        last_progress: Callable[[], float] | None = None,
        commit_before_rejoin: bool = False,
    ) -> None:
        """``before_join`` runs once, right before the first JoinGroup (a pod's processes
        join together: ``processes/join.py``). ``last_progress`` is the monotonic time at
        which the processing thread was last back in its loop (liveness, :meth:`_liveness`).
        ``commit_before_rejoin`` (exactly-once) raises the commit barrier before every
        JoinGroup of a member holding tasks (:meth:`_commit_barrier`)."""
        super().__init__(name="baton-membership", daemon=True)
        self._commit_before_rejoin = commit_before_rejoin
        self._assigned_generation = -1  # the generation of the last assignment received
        self._before_join = before_join
        self._last_progress = last_progress
        self.left_for_stall = False  # out of the group while the processing thread is stuck
        self._closing_lost = False  # closing a client whose partitions were handed back as lost
        self.settings = settings
        self.events: queue.Queue[Event] = queue.Queue()
        self._client_config = client_config
        self._offsets = offsets
        self._end_offsets = end_offsets
        self._stopping = threading.Event()
        self._owned: set[TP] = set()
        self._roles = Roles()
        self._probe_at: float | None = None
        self._probe_generation = -1  # the generation whose assignment asked for the probe
        self._commits: queue.Queue[tuple[dict[TP, tuple[int, str]], Identity | None, Future[None]]] = (
            queue.Queue()
        )
        self._consumer: KafkaConsumer | None = None
        self._started = threading.Event()
        self._error: BaseException | None = None
        self._ends: dict[TP, int] | None = None  # changelog end offsets, refreshed between polls
        self._followup_at: float | None = None
        self._followups = 0  # follow-up rebalances in a row for actives still held back
        self._followup_generation = -1  # the generation whose assignment asked for the follow-up
        self._following_up: int | None = None  # set while a follow-up rejoin is pending (wire.Subscription)
        self._roles_received = False  # any assignment yet (the pod check below is for the first only)
        self._pod_mates_missing = False  # set by leader_assign, read by the assignment that follows it
        # the operator marked this member's Pod to go (a scale-in): reported at every join, and a
        # change asks for a rebalance so the leader moves its actives away (or gives them back)
        self._draining = False
        self._drain_changed = False
        # (generation, member id) of the last assignment the processing thread applied: its tasks
        # are held under it (see applied, group_metadata, _lost_with_membership). One tuple.
        self._held: Identity | None = None

    # -- lifecycle ---------------------------------------------------------------------------
    def _connect(self) -> KafkaConsumer:
        consumer = KafkaConsumer(
            group_id=self.settings.group_id,
            group_instance_id=self.settings.instance_id,
            partition_assignment_strategy=[TaskAssignor(self)],
            enable_auto_commit=False,
            **self._client_config,
        )
        self._consumer = consumer
        _keep_finished_joins(consumer._coordinator)
        consumer.subscribe(sorted(self.settings.topic_to_sub), listener=_Listener(self))
        # Know every input topic's partitions before the first JoinGroup: a leader that joins
        # before its metadata arrives assigns no tasks of the topics it does not know yet. It
        # rebalances again once the metadata comes, unless it dies first; restarted, a static
        # member is handed that stored assignment and the group sat with no tasks for good
        # (a CI run of tests/integration/test_engine_global_table.py, whose input is stateless
        # and so was not fetched by ``_refresh_ends``).
        for topic in sorted(self.settings.topic_to_sub):
            consumer.partitions_for_topic(topic)
        return consumer

    def run(self) -> None:
        try:
            consumer = self._connect()
            self._refresh_ends(consumer)
        except BaseException as exc:
            self._error = exc
            self._started.set()
            raise
        self._started.set()
        if self._before_join is not None:
            self._before_join()
        unstable_since: float | None = None
        next_ends = 0.0
        try:
            while not self._stopping.is_set():
                if self._stalled():
                    consumer = self._leave_while_stalled(consumer)
                    unstable_since = None
                    continue
                consumer.poll(timeout_ms=100, max_records=1)  # drives the group; any record is dropped
                # pause what the group assigned, here rather than in the rebalance callback, which
                # runs on kafka-python's I/O loop and must not call back into the consumer
                unpaused = set(consumer.assignment()) - set(consumer.paused())
                if unpaused:
                    consumer.pause(*unpaused)
                self._run_commits(consumer)
                self._maybe_probe(consumer)
                self._maybe_follow_up(consumer)
                self._maybe_rejoin_for_drain(consumer)
                now = time.monotonic()
                if now >= next_ends:
                    next_ends = now + ENDS_REFRESH_SECONDS
                    self._refresh_ends(consumer)
                if consumer.group_metadata().state == MemberState.STABLE:
                    unstable_since = None
                elif unstable_since is None:
                    unstable_since = now
                elif now - unstable_since > self._stuck_after:
                    consumer = self._reconnect(consumer, now - unstable_since)
                    unstable_since = None
        except BaseException as exc:
            self._error = exc
            log.exception("group membership failed")
        finally:
            self._fail_commits()
            member_id = self._member_id()  # closing forgets it
            try:
                consumer.close(autocommit=False, timeout_ms=5000)
            except Exception as exc:
                log.info("closing the membership client failed", extra={"error": str(exc)})
            if self._draining and self._stopping.is_set() and self.settings.instance_id:
                self._leave_for_good(member_id)

    def _leave_for_good(self, member_id: str) -> None:
        """A static member marked to drain stops: it leaves the group instead of letting the
        broker wait out its session.

        A static member sends no LeaveGroup when it closes (KIP-345: a restarted Pod takes its
        place under the same ``group.instance.id`` with no rebalance), so the group kept a Pod
        removed by a scale-in for the whole session timeout, and every rebalance meanwhile
        waited for it: 35-45 s in each scale-in on the node, with the other members' commits
        paused by the barrier at rejoin. A Pod marked to drain goes for good, so it is removed
        as Kafka Streams' ``close(leaveGroup=true)`` (KIP-812) and the admin's
        ``removeMembersFromConsumerGroup`` do it. The member id guards a newer incarnation under
        the same instance id: the broker refuses to remove one that is not this member. If
        this fails, the session timeout removes the member, as before.
        """
        members = [MemberToRemove(member_id=member_id or None, group_instance_id=self.settings.instance_id)]
        admin: KafkaAdminClient | None = None
        try:
            admin = KafkaAdminClient(**admin_config(self._client_config, request_timeout_ms=5000))
            errors = admin.remove_group_members(self.settings.group_id, members)
            error = next(iter(errors.values()), None) if errors else None
            if error is not None and error is not NoError:
                raise error()
            log.info(
                "left the group for good: this Pod was marked to drain",
                extra={"group": self.settings.group_id, "instance_id": self.settings.instance_id},
            )
        except Exception as exc:
            log.warning(
                "could not leave the group; the broker removes this member after its session timeout",
                extra={"group": self.settings.group_id, "error": str(exc) or type(exc).__name__},
            )
        finally:
            if admin is not None:
                admin.close()

    @property
    def max_poll_interval_s(self) -> float:
        """Kafka's max.poll.interval.ms (300 s by default, as in Kafka Streams)."""
        return float(self._client_config.get("max_poll_interval_ms", 300_000)) / 1000

    def _stalled(self) -> bool:
        """The processing thread has not been back in its loop for max.poll.interval.ms."""
        if self._last_progress is None:
            return False
        return time.monotonic() - self._last_progress() > self.max_poll_interval_s

    def _leave_while_stalled(self, consumer: KafkaConsumer) -> KafkaConsumer:
        """Leave the group while the processing thread is stuck; join again once it is back.

        A member is alive only while its processing thread is (Kafka Streams: a thread past
        max.poll.interval.ms leaves the group). Heartbeats come from this thread, so without
        this a thread stuck for good would keep its tasks, and their output stopped, for ever.
        The held partitions are lost here (the processing thread aborts their uncommitted work
        when it returns; its commits name the old identity and are refused meanwhile); closing
        the client leaves the group at once for a dynamic member, after the session timeout
        for a static one. Queued commits fail. The new client joins under a new member id.
        """
        log.error(
            "processing thread stalled past max.poll.interval.ms; leaving the group until it is back",
            extra={
                "group": self.settings.group_id,
                "max_poll_interval_ms": int(self.max_poll_interval_s * 1000),
            },
        )
        self.left_for_stall = True
        if self._owned:
            self.partitions_lost([KTopicPartition(t, p) for t, p in sorted(self._owned)])
        self._roles = Roles()
        self._close_lost(consumer, timeout_ms=5000)
        while self._stalled() and not self._stopping.wait(0.1):
            self._fail_commits()
        log.warning(
            "processing thread back; joining the group again", extra={"group": self.settings.group_id}
        )
        self.left_for_stall = False
        return self._connect()

    @property
    def _stuck_after(self) -> float:
        """A rebalance takes at most a session timeout (a dead member's) plus a few heartbeats."""
        session = float(self._client_config.get("session_timeout_ms", 45_000)) / 1000
        return max(30.0, 3 * session)

    def _reconnect(self, consumer: KafkaConsumer, stuck: float) -> KafkaConsumer:
        """The member stayed out of a stable group far longer than any rebalance takes: start over.

        Seen with kafka-python 3.0: a leader whose SyncGroup response never arrived waited out
        the rebalance timeout while the broker, not hearing it, expired its session. Its
        partitions are handed back as lost (their uncommitted work is aborted, the broker
        fences any late commit) and a new client joins under the same instance id.
        """
        log.error(
            "group membership stuck outside a stable group; reconnecting",
            extra={"group": self.settings.group_id, "seconds": round(stuck, 1)},
        )
        if self._owned:
            self.partitions_lost([KTopicPartition(t, p) for t, p in sorted(self._owned)])
        self._roles = Roles()
        self._close_lost(consumer, timeout_ms=2000)
        return self._connect()

    def _close_lost(self, consumer: KafkaConsumer, timeout_ms: int) -> None:
        """Close a client whose partitions were just handed back as lost.

        kafka-python still counts them as its own, and ``close()`` runs the revocation
        listener first, on its network loop, before it stops heartbeating and leaves the
        group: that listener must not wait for a processing thread that is stuck (it blocked
        heartbeats and the LeaveGroup for up to REVOKE_WAIT_SECONDS, found by
        ``bench/failover.py --fault stall``), nor queue a revocation of tasks already lost.
        """
        self._closing_lost = True
        try:
            consumer.close(autocommit=False, timeout_ms=timeout_ms)
        except Exception as exc:
            log.info("closing the membership client failed", extra={"error": str(exc)})
        finally:
            self._closing_lost = False

    def _refresh_ends(self, consumer: KafkaConsumer) -> None:
        """Changelog end offsets, read here between polls so the leader's assignment does no I/O."""
        s = self.settings
        wanted: list[TP] = []
        for topic, sub in sorted(s.topic_to_sub.items()):
            if sub not in s.stateful_subs:
                continue
            for p in sorted(consumer.partitions_for_topic(topic) or ()):
                wanted.extend(s.state_partitions(TaskId(sub, p)))
        if not wanted:
            return
        ends = self._end_offsets(sorted(set(wanted)))
        if ends is not None:
            self._ends = ends

    def wait_started(self, timeout: float = 60.0) -> None:
        if not self._started.wait(timeout):
            raise RuntimeError("group membership did not start (is the broker reachable?)")
        if self._error is not None:
            raise RuntimeError(f"group membership failed to start: {self._error}") from self._error

    def stop(self) -> None:
        self._stopping.set()

    @property
    def failed(self) -> BaseException | None:
        return self._error

    # -- what the processing thread calls --------------------------------------------------------
    def group_metadata(self) -> bytes:
        """The fencing identity for ``send_offsets_to_transaction``: the generation and member id
        under which the processing thread last applied its assignment (:meth:`applied`).

        Never the live one. The group may have moved on while the processing thread was away:
        this member removed and joined again, or (same member id) a rebalance that revoked
        tasks completed without it, after the revocation's wait for its commit ran out (a
        thread stalled in user code). The tasks it still holds were held under the old
        identity, which their commit must name, for the broker to refuse it; the live one
        would pass, and the task's output would be committed twice. A commit that races an
        ordinary rebalance (kept partitions, cooperative protocol) is refused the same way,
        its transaction aborted and redone from the committed offsets: always safe, as in
        Kafka Streams, where such a commit fails with the consumer's own generation. Under
        exactly-once the commit barrier before this member's JoinGroup
        (:meth:`_commit_barrier`) keeps its commits from racing its own rebalances."""
        consumer = self._consumer
        if consumer is None:
            return librdkafka_group_metadata(self.settings.group_id, -1, "", self.settings.instance_id)
        meta = consumer.group_metadata()
        named = commit_identity(self._held, _live(meta))
        return librdkafka_group_metadata(
            self.settings.group_id, named.generation, named.member, meta.group_instance_id
        )

    def commit(self, offsets: Mapping[TP, tuple[int, str]], timeout: float = 30.0) -> None:
        """At-least-once commit of (offset, metadata); raises what the broker said.

        It carries the identity the processing thread last applied, as exactly-once commits do
        (:meth:`group_metadata`): when the group's generation or this member's id is no longer
        that one, the commit is refused before it is sent (:class:`StaleCommit`), since a
        thread that slept through a rebalance would otherwise move offsets of partitions that
        another member now owns (and has committed further) back."""
        future: Future[None] = Future()
        self._commits.put((dict(offsets), self._held, future))
        future.result(timeout)

    # -- kafka-python's thread -------------------------------------------------------------------
    def _run_commits(self, consumer: KafkaConsumer, *, in_listener: bool = False) -> None:
        """Send the processing thread's offset commits; on kafka-python's IO thread.

        Inside a rebalance listener that thread cannot block on a commit (kafka-python 3
        refuses), and the listener must return before any reply is read: the commit is
        sent asynchronously and counts as done once sent. It goes out before the JoinGroup
        that follows the listener, on the same coordinator connection, so the broker
        applies it under the generation that still owns the partitions.
        """
        while True:
            try:
                offsets, held, future = self._commits.get_nowait()
            except queue.Empty:
                return
            live = _live(consumer.group_metadata())
            if refused_before_send(held, live):
                assert held is not None
                future.set_exception(
                    StaleCommit(
                        f"commit of generation {held.generation} refused: the group is at generation "
                        f"{live.generation} (member {live.member}); the tasks will be reprocessed"
                    )
                )
                continue
            to_commit = {
                KTopicPartition(t, p): OffsetAndMetadata(o, metadata, -1)
                for (t, p), (o, metadata) in offsets.items()
            }
            try:
                if in_listener:
                    consumer.commit_async(to_commit, callback=_log_failed_commit)
                else:
                    consumer.commit(to_commit)
                future.set_result(None)
            except BaseException as exc:
                future.set_exception(exc)

    def _fail_commits(self) -> None:
        while True:
            try:
                _offsets, _held, future = self._commits.get_nowait()
            except queue.Empty:
                return
            future.set_exception(RuntimeError("group membership stopped"))

    def _maybe_follow_up(self, consumer: KafkaConsumer) -> None:
        if self._followup_at is None or time.monotonic() < self._followup_at:
            return
        self._followup_at = None
        if not _stable_at(consumer, self._followup_generation):
            return  # already rejoining, or the follow-up round is over: another would move nothing
        log.info(
            "joining the follow-up rebalance",
            extra={
                "group": self.settings.group_id,
                "generation": self._followup_generation,
                "held_back": self._followups > 0,
            },
        )
        self._rejoin_after(consumer, self._followup_generation)

    def _maybe_probe(self, consumer: KafkaConsumer) -> None:
        if self._probe_at is None or time.monotonic() < self._probe_at:
            return
        self._probe_at = None
        if not _stable_at(consumer, self._probe_generation):
            return  # another member's probe (or any rebalance) came first: the leader has decided again
        log.info("probing rebalance: warmups may have caught up", extra={"group": self.settings.group_id})
        self._rejoin_after(consumer, self._probe_generation)

    def drain(self, pods: Collection[str]) -> None:
        """The control topic's Draining record of this color (called by the processing thread
        on every turn; cheap when nothing changes): whether this member's Pod is among them."""
        draining = self.settings.host in pods
        if draining == self._draining:
            return
        self._draining = draining
        self._drain_changed = self._consumer is not None  # before the first join, the join says it
        log.info(
            "marked to drain: this Pod goes in a scale-in, its active tasks move first"
            if draining
            else "drain cancelled: this Pod stays",
            extra={"group": self.settings.group_id, "host": self.settings.host},
        )

    def _maybe_rejoin_for_drain(self, consumer: KafkaConsumer) -> None:
        if not self._drain_changed:
            return
        self._drain_changed = False
        self._rejoin_after(consumer, int(consumer.group_metadata().generation_id))

    def _rejoin_after(self, consumer: KafkaConsumer, generation: int) -> None:
        """Rejoin, naming ``generation`` in the JoinGroup (``Subscription.followup_of``): a member
        that is not the leader rejoining with unchanged metadata would be answered with the
        current generation, and no rebalance would start."""
        self._following_up = generation
        # KafkaConsumer has no public "enforce rebalance"; the coordinator's request_rejoin is that call
        consumer._coordinator.request_rejoin()

    @property
    def _barrier_wait(self) -> float:
        session = float(self._client_config.get("session_timeout_ms", 45_000)) / 1000
        return min(REJOIN_COMMIT_WAIT_SECONDS, session / 3)

    def _commit_barrier(self) -> None:
        """Right before a JoinGroup (on kafka-python's I/O thread): let the processing thread
        commit under the current generation, and wait for that commit (bounded).

        The broker moves the group to the next generation only once every member has sent
        its JoinGroup, so until this one is sent the held generation is the group's and the
        commit is accepted; one still in flight when the join completes is refused
        (ILLEGAL_GENERATION) and its whole transaction aborted. The processing thread then
        cuts no commit until it applies the next assignment (``Rejoining``). A member that
        holds no task, or whose membership ended (its tasks are lost, not committed), has
        nothing to commit; a generation that already moved past the held assignment's (a
        rejoin after a failed SyncGroup) would refuse the commit, so only the pause is
        asked for. The wait is bounded well below the session timeout (no heartbeat goes
        out meanwhile) and the rebalance timeout: past it the member joins anyway, and a
        commit still in flight may be refused, as before the barrier; a zombie's commit is
        refused by the broker whatever the barrier does.
        """
        consumer = self._consumer
        if (
            not self._commit_before_rejoin
            or consumer is None
            or self._stopping.is_set()
            or self._closing_lost
        ):
            return
        if not self._owned or not self._membership_continues():
            return
        current = int(consumer.group_metadata().generation_id) == self._assigned_generation
        event = Rejoining(commit=current)
        self.events.put(event)
        if not current:
            return
        started = time.monotonic()
        if not event.done.wait(self._barrier_wait):
            event.abandoned.set()
            log.warning(
                "the commit before rejoining did not end in time; rejoining anyway",
                extra={"group": self.settings.group_id, "seconds": self._barrier_wait},
            )
            return
        log.info(  # what the barrier adds to the rebalance
            "committed before rejoining",
            extra={"group": self.settings.group_id, "ms": round((time.monotonic() - started) * 1000, 1)},
        )

    def subscription_metadata(self, topics: Collection[str]) -> ConsumerProtocolSubscription:
        self._pod_mates_missing = False  # a new JoinGroup: what a leader saw last round is moot
        self._commit_barrier()
        # A member joining again under a new member id claims nothing: what it held was lost with
        # its old membership (``_lost_with_membership``), and another member may own it now. A
        # stale claim made the leader hand those partitions back while their owner still held them.
        owned = self._owned if self._membership_continues() else set()
        owned_tasks = set(tasks_for(sorted(owned), dict(self.settings.topic_to_sub)))
        try:
            offsets = dict(self._offsets())
        except Exception:  # never fail a join over the report: no state reported is safe
            log.exception("could not read local task offsets")
            offsets = {}
        for task in owned_tasks:
            offsets[task] = RUNNING
        report = Subscription(
            process=self.settings.process,
            host=self.settings.host,
            offsets=offsets,
            active=frozenset(owned_tasks),
            standby=self._roles.standby | self._roles.warmup,
            endpoint=self.settings.endpoint,
            zone=self.settings.zone,
            followup_of=self._following_up,
            draining=self._draining,
        )
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(owned):
            by_topic.setdefault(topic, []).append(partition)
        sub_tp = ConsumerProtocolSubscription.TopicPartition
        return ConsumerProtocolSubscription(
            version=TaskAssignor.version,
            topics=sorted(topics),
            user_data=report.encode(),
            owned_partitions=[sub_tp(topic=t, partitions=p) for t, p in by_topic.items()],
        )

    def leader_assign(self, cluster: Any, members: list[Any]) -> dict[str, ConsumerProtocolAssignment]:
        """The group's assignment, on the leader (``leader.py``); remembers for the assignment
        that follows whether processes of this member's pod are missing from it."""
        out, self._pod_mates_missing = leader_assignment(
            self.settings, cluster, members, self._ends, not self._roles_received
        )
        return out

    def assignment_received(self, assignment: ConsumerProtocolAssignment, generation: int) -> None:
        try:
            roles = Roles.decode(assignment.user_data)
        except BadUserData as exc:
            log.error("assignment user data unreadable; hosting no standbys", extra={"error": str(exc)})
            roles = Roles()
        self._roles = roles
        self._assigned_generation = generation
        owned = frozenset((tp.topic, tp.partition) for tp in assignment.partitions())
        lost = self._lost_with_membership(generation)
        self.events.put(RolesChanged(generation, roles, owned, self._member_id()))
        regained = sorted(owned & set(lost))
        if regained:  # kafka-python counts them as kept, so it reports them as assigned to no one
            self._owned.update(regained)
            self.events.put(Assigned(regained))
        held_back = roles.active - set(tasks_for(sorted(owned), dict(self.settings.topic_to_sub)))
        # Actives withheld until their current owner releases them arrive one rebalance later.
        # Their owner rejoins once it has released them, but the other members only hear of
        # that rebalance at their next heartbeat, and the partition's output pauses meanwhile
        # (a heartbeat interval, measured in bench/scaleout.py). The receiver knows that
        # rebalance is coming, so it joins it at once: the coordinator still waits for the
        # owner's JoinGroup, which is sent only after the release. That early JoinGroup names
        # the generation it follows (``Subscription.followup_of``): with the same metadata as
        # its last one, the coordinator answers it with the current generation and starts no
        # rebalance, and the receiver waited a heartbeat after all. An owner that died, or
        # restarted within the session (static membership hands it its stored assignment),
        # never rejoins by itself: the same rejoin covers it. Should the actives still be
        # held back after that, the next follow-up waits FOLLOWUP_SECONDS (no rebalance storm).
        # The other members (neither releasing nor receiving) would also hear of that rebalance
        # only at their next heartbeat, and the coordinator waits for them too: the leader
        # marks an assignment that moves actives (``followup``), and they join at once as
        # well. A member that releases partitions needs nothing: kafka-python rejoins for it.
        # Every member schedules the probing rebalance, not only the leader that asked for it:
        # a leader restarted within its session is handed its stored assignment, is not told
        # it leads (no KIP-814 in kafka-python) and would never probe, leaving the warmups
        # unpromoted for good. Members' probes at about the same time make one rebalance.
        if roles.probe_after_ms is not None:
            self._probe_at = time.monotonic() + roles.probe_after_ms / 1000
            self._probe_generation = generation
        else:
            self._probe_at = None
        donor = bool(self._owned - owned)
        self._followup_generation = generation
        self._following_up = None
        if held_back:
            delay = FIRST_FOLLOWUP_SECONDS if self._followups == 0 else FOLLOWUP_SECONDS
            self._followups += 1
            self._followup_at = time.monotonic() + delay
        elif roles.followup and not donor:
            self._followups = 0
            self._followup_at = time.monotonic() + FIRST_FOLLOWUP_SECONDS
        elif self._pod_mates_missing:
            # This member's first generation, which it leads, lacks processes of its own pod
            # that passed the join barrier with it: their JoinGroups reached the coordinator
            # milliseconds after this one's, when a broker with no initial rebalance delay had
            # already closed the generation. Those joins started the next rebalance, which this
            # member would hear of at its next heartbeat (a second, with one process doing the
            # pod's work and the other idle). A leader's JoinGroup always starts a rebalance, so
            # it rejoins at once; a sibling that is not joining after all costs one rebalance,
            # once per start.
            log.info(
                "rejoining at once: the pod's other processes are joining",
                extra={"group": self.settings.group_id, "generation": generation},
            )
            self._followups = 0
            self._followup_at = time.monotonic() + FIRST_FOLLOWUP_SECONDS
        elif roles.incomplete:
            # Any member's rejoin with new metadata starts a rebalance, and the leader's metadata
            # has long arrived by then; a member restarted into this stored assignment rejoins
            # too. Not at once: a topic that stays unknown costs one rebalance per FOLLOWUP_SECONDS.
            self._followups = 0
            self._followup_at = time.monotonic() + FOLLOWUP_SECONDS
        else:
            self._followup_at, self._followups = None, 0
        self._pod_mates_missing = False
        self._roles_received = True

    def _lost_with_membership(self, generation: int) -> list[TP]:
        """The partitions held under a membership that has ended: lost, whatever comes next.

        A member removed by the coordinator in the middle of a rebalance (its SyncGroup
        refused with UNKNOWN_MEMBER_ID: it stalled past its session timeout between JoinGroup
        and SyncGroup) joins again under a new member id. kafka-python has already run its
        pre-rebalance step for that rebalance, so it never calls ``on_partitions_lost``: it
        counts the partitions it held as its own, reports them revoked or keeps them. Another
        member owned them meanwhile, processed and committed; this one's tasks, kept or
        committed at revocation under the new identity (which the broker accepts), would
        emit counts already emitted. Java's consumer loses them on any rejoin from a reset
        generation. The member id names the membership: one that changed under held
        partitions means they were lost.
        """
        if not self._owned or self._membership_continues():
            return []
        lost = sorted(self._owned)
        log.warning(
            "membership ended with partitions held; they are lost",
            extra={"group": self.settings.group_id, "generation": generation, "partitions": lost},
        )
        self.partitions_lost([KTopicPartition(t, p) for t, p in lost])
        return lost

    def applied(self, event: RolesChanged) -> None:
        """The processing thread has applied ``event`` (and every loss before it): its tasks are
        held under that assignment's identity from now on. Set here, not when the assignment
        arrives: until then the tasks of an ended membership may still be open, and a commit
        of theirs must name the old identity, for the broker to refuse it."""
        self._held = Identity(event.generation, event.member)

    def _membership_continues(self) -> bool:
        """Whether this member is still in the membership its held partitions came under."""
        return not membership_ended(self._held, self._member_id())

    def _member_id(self) -> str:
        consumer = self._consumer
        return "" if consumer is None else str(consumer.group_metadata().member_id or "")

    def partitions_revoked(self, revoked: Collection[KTopicPartition]) -> None:
        tps = sorted((tp.topic, tp.partition) for tp in revoked)
        self._owned.difference_update(tps)
        if self._closing_lost:
            return  # lost already, the processing thread told (_close_lost)
        event = Revoked(tps)
        self.events.put(event)
        if self._stopping.is_set():
            return
        # The processing thread commits before it releases the tasks. Under at-least-once that
        # offset commit runs on this very thread (``commit`` -> ``_run_commits``), which this
        # listener blocks: serve it while waiting. (It used to wait out the commit's 30 s
        # timeout, fail, and leave the next owner to count the revoked work a second time.)
        deadline = time.monotonic() + REVOKE_WAIT_SECONDS
        while not event.done.wait(0.01):
            if self._consumer is not None:
                self._run_commits(self._consumer, in_listener=True)
            if time.monotonic() > deadline:
                log.warning("revoked tasks not released in time; rejoining anyway", extra={"partitions": tps})
                return

    def partitions_assigned(self, assigned: Collection[KTopicPartition]) -> None:
        tps = sorted((tp.topic, tp.partition) for tp in assigned)
        self._owned.update(tps)
        self.events.put(Assigned(tps))

    def partitions_lost(self, lost: Collection[KTopicPartition]) -> None:
        tps = sorted((tp.topic, tp.partition) for tp in lost)
        self._owned.difference_update(tps)
        self.events.put(Lost(tps))
