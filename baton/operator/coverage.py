"""How many of a color's tasks would fail over by promotion, read from the group itself.

The group leader's assignor counts, at every rebalance, the stateful tasks that have a
standby within acceptable.recovery.lag of the changelog (see
``baton.worker.assignment.model.StandbyCoverage``), and writes the count into every
member's assignment user data. The broker keeps that assignment, and DescribeGroups
returns it, so the operator reads the count without reaching any Pod and without a new
topic. confluent-kafka's group description leaves user data out, so the read goes through
kafka-python's admin client, which the worker already uses for membership.

The count is as fresh as the group's last rebalance. A standby that is not caught up
makes the leader schedule a probing rebalance (``probingRebalanceIntervalMs``), so the
count reaches the truth within one interval once the standbys have caught up.
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
from kafka.admin import KafkaAdminClient

from baton.clients.kafka_python import admin_config, kafka_python_config
from baton.clients.settings import OPERATOR_CLIENTS, KafkaSettings
from baton.worker.assignment.model import StandbyCoverage
from baton.worker.assignment.wire import BadUserData, Roles, Subscription

TIMEOUT_MS = 10_000


def coverage_from(description: Mapping[str, Any]) -> StandbyCoverage | None:
    """The coverage in a described group's assignments; None if no member carries one.

    Every member's assignment carries the same count; an empty or rebalancing group has
    no assignment to read (members still joining report no user data).
    """
    for member in description.get("members") or []:
        assignment = member.get("member_assignment")
        data = assignment.get("user_data") if isinstance(assignment, Mapping) else None
        if isinstance(data, str):
            data = data.encode()
        if not data:
            continue
        try:
            roles = Roles.decode(data)
        except (BadUserData, orjson.JSONDecodeError, ValueError):
            continue  # not a Baton worker, or a newer one: another member may say
        if roles.coverage is not None:
            return roles.coverage
    return None


@dataclass(frozen=True)
class GroupRoles:
    """What the group's last assignment gave its members, for the autoscaler's steps: the
    warmups still catching up (a scale-out ends when none is left) and, per Pod, the active
    tasks and partitions its members hold (a scale-in removes a Pod once it holds none)."""

    members: int
    warmups: int
    actives_by_host: Mapping[str, int]

    def actives_on(self, hosts: Collection[str]) -> int:
        return sum(n for host, n in self.actives_by_host.items() if host in hosts)


def _user_data(section: object) -> bytes | None:
    data = section.get("user_data") if isinstance(section, Mapping) else None
    if isinstance(data, str):
        data = data.encode()
    return data if isinstance(data, bytes) and data else None


def _partitions(assignment: Mapping[str, Any]) -> int:
    """Partitions in a member's assignment, as kafka-python decodes them (pairs or objects)."""
    count = 0
    for entry in assignment.get("assigned_partitions") or []:
        parts = entry.get("partitions") if isinstance(entry, Mapping) else entry[1]
        count += len(parts or [])
    return count


def roles_from(description: Mapping[str, Any]) -> GroupRoles | None:
    """The members' roles in a described group; None while any member has no Baton assignment
    (a rebalance in progress, or not a Baton group): unknown, so no step moves on it."""
    members = description.get("members") or []
    if not members:
        return None
    warmups = 0
    by_host: dict[str, int] = {}
    for member in members:
        assignment = member.get("member_assignment")
        data = _user_data(assignment)
        if data is None or not isinstance(assignment, Mapping):
            return None
        try:
            roles = Roles.decode(data)
        except (BadUserData, orjson.JSONDecodeError, ValueError):
            return None
        host = str(member.get("group_instance_id") or member.get("client_id") or member.get("member_id"))
        subscription = _user_data(member.get("member_metadata"))
        if subscription is not None:
            with contextlib.suppress(BadUserData, orjson.JSONDecodeError, ValueError):
                host = Subscription.decode(subscription).host or host
        warmups += len(roles.warmup)
        # the leader's actives, or the partitions still held when more (a revoked task is
        # released a moment after the assignment that moves it)
        by_host[host] = by_host.get(host, 0) + max(len(roles.active), _partitions(assignment))
    return GroupRoles(len(members), warmups, by_host)


def describe(client_config: Mapping[str, str], groups: list[str]) -> dict[str, Mapping[str, Any]]:
    """kafka-python's descriptions of ``groups`` (one client, one request per coordinator)."""
    settings = KafkaSettings.of(client_config["bootstrap.servers"], client_config, clients=OPERATOR_CLIENTS)
    admin = KafkaAdminClient(**admin_config(kafka_python_config(settings), TIMEOUT_MS))
    try:
        described = admin.describe_groups(groups)
    finally:
        admin.close()
    return {group: described.get(group) or {} for group in groups}


def read_coverages(client_config: Mapping[str, str], groups: list[str]) -> dict[str, StandbyCoverage]:
    """Describe ``groups`` (one client, one request per coordinator); the ones with a coverage."""
    out = {}
    for group, description in describe(client_config, groups).items():
        found = coverage_from(description)
        if found is not None:
            out[group] = found
    return out


def read_coverage(client_config: Mapping[str, str], group: str) -> StandbyCoverage | None:
    """One group's coverage (None: no such group, or no Baton assignment)."""
    return read_coverages(client_config, [group]).get(group)


def as_status(coverage: StandbyCoverage) -> dict[str, int]:
    """The ``standbys`` object of a StreamApp's status."""
    return {"tasks": coverage.tasks, "withStandby": coverage.with_standby, "caughtUp": coverage.caught_up}
