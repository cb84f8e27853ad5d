"""What members tell the leader, and what the leader hands back, as user data bytes.

Kafka's classic group protocol carries an opaque ``user_data`` in every member's
subscription (JoinGroup) and in every member's assignment (SyncGroup). Kafka Streams
puts its SubscriptionInfo / AssignmentInfo there; Baton puts these two small JSON
documents. Each carries a version so that a newer worker can still read an older one
during a rolling upgrade (unknown fields are ignored; an unknown major version is an
error the leader logs, treating the member as having no state).

Also here: the group metadata bytes confluent-kafka's transactional producer expects in
``send_offsets_to_transaction``. Membership runs in another client (see
``membership.py``), so the generation and member id that fence zombies come from that
client, and librdkafka must be handed them in its own serialized form.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import orjson

from baton.worker.assignment.model import StandbyCoverage
from baton.worker.naming import TaskId

VERSION = 1
RUNNING = -2  # Kafka Streams' LATEST_OFFSET: the member runs the task active, so it is caught up


class BadUserData(ValueError):
    """User data this worker cannot read (another major version, or corrupt)."""


def _tasks(values: Iterable[TaskId]) -> list[str]:
    return sorted(str(t) for t in values)


def _parse_tasks(values: object) -> frozenset[TaskId]:
    if not isinstance(values, list):
        raise BadUserData(f"expected a list of task ids, got {values!r}")
    return frozenset(TaskId.parse(str(v)) for v in values)


@dataclass(frozen=True)
class Subscription:
    """A member's report: who it is and what state it holds, per task.

    ``offsets`` is Kafka Streams' "task offset sums": for each task with local state, the
    sum over its stores of the changelog offset the store reflects (``RUNNING`` for a task
    active here). The leader turns it into a lag with the changelogs' end offsets.
    """

    process: str
    host: str
    offsets: Mapping[TaskId, int] = field(default_factory=dict)
    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    endpoint: str = ""  # host:port of its HTTP server (Kafka Streams' application.server)
    zone: str = ""  # its failure domain: standbys avoid a task's active zone
    # The generation a follow-up rejoin comes after (membership.py, ``_maybe_follow_up``);
    # None at any other join. The leader does not read it: it is there so that the rejoin's
    # metadata differs from the member's last JoinGroup. A known member that rejoins a
    # stable group with the same metadata is answered with the current generation and
    # starts no rebalance (the group coordinator's rule for a non-leader), so a follow-up
    # sent before the old owner's own rejoin was absorbed, and the member heard of the
    # rebalance only at its next heartbeat: 3 s with the tasks it waits for idle.
    followup_of: int | None = None
    # its Pod is about to go (a scale-in, the control topic's Draining record): it gets no
    # active task, so what it runs moves to members that stay before the Pod is removed
    draining: bool = False

    def encode(self) -> bytes:
        doc: dict[str, object] = {
            "v": VERSION,
            "process": self.process,
            "host": self.host,
            "offsets": {str(t): o for t, o in sorted(self.offsets.items())},
            "active": _tasks(self.active),
            "standby": _tasks(self.standby),
        }
        if self.endpoint:
            doc["endpoint"] = self.endpoint
        if self.zone:
            doc["zone"] = self.zone
        if self.followup_of is not None:
            doc["followup_of"] = self.followup_of
        if self.draining:
            doc["draining"] = True
        return orjson.dumps(doc)

    @classmethod
    def decode(cls, data: bytes | None) -> Subscription:
        doc = _load(data)
        offsets = doc.get("offsets", {})
        if not isinstance(offsets, dict):
            raise BadUserData("offsets must be an object")
        return cls(
            process=str(doc.get("process", "")),
            host=str(doc.get("host", "")),
            offsets={TaskId.parse(k): int(v) for k, v in offsets.items()},
            active=_parse_tasks(doc.get("active", [])),
            standby=_parse_tasks(doc.get("standby", [])),
            endpoint=str(doc.get("endpoint", "")),
            zone=str(doc.get("zone", "")),
            followup_of=None if doc.get("followup_of") is None else int(str(doc["followup_of"])),
            draining=doc.get("draining") is True,
        )


@dataclass(frozen=True)
class Roles:
    """A member's part of the leader's decision: its tasks by role.

    ``active`` may hold tasks not (yet) in the member's partitions: under cooperative
    rebalancing a task moving between members is withheld from its new owner until the
    old one has released it, one rebalance later. The partitions are what the member
    owns now; ``active`` is where the leader is heading.
    """

    active: frozenset[TaskId] = frozenset()
    standby: frozenset[TaskId] = frozenset()
    warmup: frozenset[TaskId] = frozenset()
    probe_after_ms: int | None = None  # warmups are running: every member rejoins after this long (a probe)
    coverage: StandbyCoverage | None = None  # the whole group's, the same in every member's roles
    followup: bool = False  # some active moves between members: a follow-up rebalance comes at once
    # the leader knew no partitions of some input topic, so tasks may be missing: every member
    # rejoins a little later (a restarted static leader is handed this stored assignment and
    # would never notice the topic's metadata arriving; kafka-python has no KIP-814)
    incomplete: bool = False
    # every member's endpoint -> the tasks it runs active: interactive queries' routing
    # (Kafka Streams' partitionsByHost), the same in every member's roles
    endpoints: Mapping[str, frozenset[TaskId]] = field(default_factory=dict)

    def encode(self) -> bytes:
        doc: dict[str, object] = {
            "v": VERSION,
            "active": _tasks(self.active),
            "standby": _tasks(self.standby),
            "warmup": _tasks(self.warmup),
            "probe_after_ms": self.probe_after_ms,
        }
        if self.followup:
            doc["followup"] = True
        if self.incomplete:
            doc["incomplete"] = True
        if self.endpoints:
            doc["endpoints"] = {e: _tasks(ts) for e, ts in sorted(self.endpoints.items())}
        if self.coverage is not None:
            c = self.coverage
            doc["coverage"] = {"tasks": c.tasks, "with_standby": c.with_standby, "caught_up": c.caught_up}
        return orjson.dumps(doc)

    @classmethod
    def decode(cls, data: bytes | None) -> Roles:
        doc = _load(data)
        probe = doc.get("probe_after_ms")
        coverage = doc.get("coverage")
        if coverage is not None and not isinstance(coverage, dict):
            raise BadUserData("coverage must be an object")
        endpoints = doc.get("endpoints", {})
        if not isinstance(endpoints, dict):
            raise BadUserData("endpoints must be an object")
        return cls(
            active=_parse_tasks(doc.get("active", [])),
            standby=_parse_tasks(doc.get("standby", [])),
            warmup=_parse_tasks(doc.get("warmup", [])),
            probe_after_ms=None if probe is None else int(str(probe)),
            followup=doc.get("followup") is True,
            incomplete=doc.get("incomplete") is True,
            endpoints={str(e): _parse_tasks(ts) for e, ts in endpoints.items()},
            coverage=None
            if coverage is None
            else StandbyCoverage(
                tasks=int(coverage.get("tasks", 0)),
                with_standby=int(coverage.get("with_standby", 0)),
                caught_up=int(coverage.get("caught_up", 0)),
            ),
        )


def _load(data: bytes | None) -> dict[str, object]:
    if not data:
        raise BadUserData("no user data (a member that is not a Baton worker?)")
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise BadUserData(f"user data is not JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise BadUserData("user data must be a JSON object")
    version = doc.get("v")
    if not isinstance(version, int) or version < 1 or version > VERSION:
        raise BadUserData(f"user data version {version!r}; this worker reads versions 1..{VERSION}")
    return doc


_CGMD_MAGIC = b"CGMDv2:"
_GENERATION = struct.Struct("=i")  # librdkafka copies the int32 in the machine's byte order


def librdkafka_group_metadata(
    group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
) -> bytes:
    """The bytes confluent-kafka's ``consumer_group_metadata()`` returns, for any membership.

    librdkafka's public ``rd_kafka_consumer_group_metadata_new_with_genid()`` builds this
    object from exactly these four values, but confluent-kafka (Python) exposes only the
    serialized form (``rd_kafka_consumer_group_metadata_write``): magic, generation id,
    then NUL-terminated group id and member id, a "group instance id is null" byte and the
    instance id. ``send_offsets_to_transaction`` reads it back with
    ``rd_kafka_consumer_group_metadata_read``, and the broker fences a transactional
    offset commit whose generation or member id is stale (KIP-447). A unit test compares
    this with librdkafka's own output.
    """
    out = (
        _CGMD_MAGIC + _GENERATION.pack(generation_id) + group_id.encode() + b"\0" + member_id.encode() + b"\0"
    )
    if group_instance_id is None:
        return out + b"\x01"
    return out + b"\x00" + group_instance_id.encode() + b"\0"
