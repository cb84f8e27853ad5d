"""Helpers for failover tests and the failover benchmark: group views, standby and metric scraping.

Like ``baton.testing``, nothing here fakes Kafka: the group is described by the real
broker, and what a worker hosts is read from its own log lines and ``/metrics``.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

import orjson
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._group import ConsumerGroupDescription

from baton.testing import WorkerProcess, produce


@dataclass(frozen=True)
class Member:
    """One consumer of the group as the broker describes it."""

    member_id: str
    identity: str  # group.instance.id, or client.id for dynamic members
    partitions: tuple[tuple[str, int], ...]


def members_from(description: ConsumerGroupDescription) -> list[Member] | None:
    """Members and their partitions, or None while the group is not stable (assignment in flux)."""
    if description.state != ConsumerGroupState.STABLE:
        return None
    out = []
    for m in description.members:
        partitions = tuple(sorted((tp.topic, tp.partition) for tp in (m.assignment.topic_partitions or [])))
        out.append(
            Member(member_id=m.member_id, identity=m.group_instance_id or m.client_id, partitions=partitions)
        )
    return out


def clicks(start: int, n: int, prefix: str = "k") -> list[tuple[bytes, bytes]]:
    """``n`` clicks of ``n`` distinct users: each key once, so the state holds ``n`` keys."""
    return list(_clicks(start, n, prefix))


def load_clicks(bootstrap: str, topic: str, keys: int) -> None:
    """``keys`` clicks of distinct users into ``topic``, 100,000 per produce call (bench inputs)."""
    for start in range(0, keys, 100_000):
        produce(bootstrap, topic, clicks(start, min(100_000, keys - start)))


def user_clicks(events: int, users: int) -> Iterator[tuple[bytes, bytes]]:
    """``events`` clicks spread over ``users`` users, seeded: every throughput run reads the same input."""
    rng = random.Random(1)
    names = [f"user-{i}" for i in range(users)]
    for i in range(events):
        user = rng.choice(names)
        yield user.encode(), orjson.dumps({"user_id": user, "timestamp": 1678886400 + i})


def load_user_clicks(bootstrap: str, topic: str, events: int, users: int) -> dict[bytes, int]:
    """Produce ``user_clicks`` into ``topic``; returns the count per user a counter must end with."""
    expected: dict[bytes, int] = {}

    def counted() -> Iterator[tuple[bytes, bytes]]:
        for key, value in user_clicks(events, users):
            expected[key] = expected.get(key, 0) + 1
            yield key, value

    produce(bootstrap, topic, counted())
    return expected


def _clicks(start: int, n: int, prefix: str) -> Iterator[tuple[bytes, bytes]]:
    for i in range(start, start + n):
        user = f"{prefix}{i}"
        yield user.encode(), orjson.dumps({"user_id": user, "timestamp": i})


def describe(bootstrap: str, group: str, expect_members: int | None = None) -> list[Member] | None:
    """The group's members and assignments when stable (and of the expected size), else None."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    description: ConsumerGroupDescription = admin.describe_consumer_groups([group])[group].result(15)
    members = members_from(description)
    if members is None or (expect_members is not None and len(members) != expect_members):
        return None
    if expect_members is not None and not all(m.partitions for m in members):
        return None
    return members


def owned_tasks(members: list[Member]) -> dict[str, list[int]]:
    """Member identity (instance id) -> partitions it owns."""
    return {m.identity: sorted(p for _t, p in m.partitions) for m in members}


def hosted_standbys(worker: WorkerProcess) -> set[int]:
    """Partitions whose standby this worker hosts now, replayed from its log lines."""
    hosted: set[int] = set()
    for line in worker.logs():
        msg, task = line.get("msg"), line.get("task")
        if not isinstance(task, str):
            continue
        partition = int(task.split("_")[1])
        if msg == "standby started":
            hosted.add(partition)
        elif msg in ("standby stopped", "standby promoted"):
            hosted.discard(partition)
    return hosted


def roles(worker: WorkerProcess) -> dict[str, set[int]]:
    """The worker's latest roles from the group leader: partitions by role (active, standby, warmup)."""
    latest: dict[str, set[int]] = {"active": set(), "standby": set(), "warmup": set()}
    for line in worker.logs():
        if line.get("msg") == "assignment received":
            latest = {role: {int(str(t).split("_")[1]) for t in as_list(line.get(role))} for role in latest}
    return latest


def settled(bootstrap: str, group: str, workers: dict[str, WorkerProcess]) -> dict[str, list[int]] | None:
    """Who owns which partitions once the group has settled, else None.

    Settled: the broker describes a stable group of exactly these members, every member's
    latest roles are of one generation with no warmups, and each member owns exactly the
    actives those roles give it (nothing held back for a follow-up rebalance). A stable
    group alone is not enough: a cooperative move ends with a second rebalance, and the
    group is stable for a moment in between.
    """
    members = describe(bootstrap, group, expect_members=len(workers))
    if members is None:
        return None
    owned = owned_tasks(members)
    generations = set()
    for name, worker in workers.items():
        latest = [x for x in worker.logs() if x.get("msg") == "assignment received"]
        if not latest or as_list(latest[-1].get("warmup")):
            return None
        generations.add(latest[-1].get("generation"))
        if roles(worker)["active"] != set(owned.get(name, [])):
            return None
    return owned if len(generations) == 1 else None


def as_list(value: object) -> list[object]:
    """A log field that should hold a list, as one (anything else reads as empty)."""
    return value if isinstance(value, list) else []


def labelled_metric(worker: WorkerProcess, name: str) -> dict[str, float]:
    """One metric's samples by label text (``{task="0_3",store="s"}`` -> value)."""
    _status, body = worker.http("/metrics")
    out: dict[str, float] = {}
    for line in body.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            labels, value = line[len(name) :].rsplit(" ", 1)
            out[labels] = float(value)
    return out
