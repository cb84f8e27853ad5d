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

from collections.abc import Mapping
from typing import Any

import orjson
from kafka.admin import KafkaAdminClient

from baton.clients.kafka_python import kafka_python_config
from baton.clients.settings import OPERATOR_CLIENTS, KafkaSettings
from baton.worker.assignment.model import StandbyCoverage
from baton.worker.assignment.wire import BadUserData, Roles

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


def read_coverages(client_config: Mapping[str, str], groups: list[str]) -> dict[str, StandbyCoverage]:
    """Describe ``groups`` (one client, one request per coordinator); the ones with a coverage."""
    settings = KafkaSettings.of(client_config["bootstrap.servers"], client_config, clients=OPERATOR_CLIENTS)
    config = kafka_python_config(settings)
    config.pop("max_poll_interval_ms", None)  # group timings are a member's, not an admin's
    config.pop("session_timeout_ms", None)
    config.pop("heartbeat_interval_ms", None)
    admin = KafkaAdminClient(**config, request_timeout_ms=TIMEOUT_MS)
    try:
        described = admin.describe_groups(groups)
    finally:
        admin.close()
    out = {}
    for group in groups:
        found = coverage_from(described.get(group) or {})
        if found is not None:
            out[group] = found
    return out


def read_coverage(client_config: Mapping[str, str], group: str) -> StandbyCoverage | None:
    """One group's coverage (None: no such group, or no Baton assignment)."""
    return read_coverages(client_config, [group]).get(group)


def as_status(coverage: StandbyCoverage) -> dict[str, int]:
    """The ``standbys`` object of a StreamApp's status."""
    return {"tasks": coverage.tasks, "withStandby": coverage.with_standby, "caughtUp": coverage.caught_up}
