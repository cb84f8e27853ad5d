"""The operator's standby coverage: read from the group's assignment user data, shown in status."""

from __future__ import annotations

from typing import Any

import pytest

from baton.operator.core.builders.statefulset import spec_hash
from baton.operator.core.status import Observed, compute_status
from baton.operator.coverage import GroupRoles, as_status, coverage_from, roles_from
from baton.worker.assignment.model import StandbyCoverage
from baton.worker.assignment.wire import Roles, Subscription
from baton.worker.naming import TaskId
from tests.support.samples import app, sts

pytestmark = pytest.mark.unit


def member(user_data: bytes | str | None) -> dict[str, Any]:
    """A member as kafka-python's describe_groups returns it (assignment decoded to a dict)."""
    return {"member_id": "m", "member_assignment": {"assigned_partitions": [], "user_data": user_data}}


def test_the_coverage_is_read_from_any_baton_members_assignment() -> None:
    covered = StandbyCoverage(tasks=12, with_standby=12, caught_up=9)
    roles = Roles(coverage=covered).encode()
    group = {"members": [member(None), member(b"not json"), member(roles.decode())]}
    assert coverage_from(group) == covered
    assert coverage_from({"members": [member(roles)]}) == covered


@pytest.mark.parametrize(
    "group",
    [
        {"members": []},  # no group, or an empty one
        {"members": [member(b'{"v": 1, "active": ["0_1"]}')]},  # a worker from before coverage
        {"members": [{"member_id": "joining", "member_assignment": b""}]},  # a rebalance in progress
    ],
)
def test_no_coverage_without_a_baton_assignment_that_carries_it(group: dict[str, Any]) -> None:
    assert coverage_from(group) is None


def test_the_active_colors_coverage_is_the_apps_and_each_color_has_its_own() -> None:
    blue = as_status(StandbyCoverage(tasks=8, with_standby=8, caught_up=8))
    green = as_status(StandbyCoverage(tasks=8, with_standby=8, caught_up=3))
    observed = Observed(
        statefulsets={"blue": sts(3), "green": sts(3)}, standbys={"blue": blue, "green": green}
    )
    status = compute_status(app(), observed, spec_hash(app().spec))
    assert status["standbys"] == {"tasks": 8, "withStandby": 8, "caughtUp": 8}
    assert status["colors"]["green"]["standbys"]["caughtUp"] == 3
    unknown = compute_status(
        app(), Observed(statefulsets={"blue": sts(3), "green": sts(3)}), spec_hash(app().spec)
    )
    assert "standbys" not in unknown and "standbys" not in unknown["colors"]["blue"]


def _described(host: str, roles: Roles, partitions: list[int]) -> dict[str, Any]:
    """A member as kafka-python describes it: subscription and assignment decoded to dicts."""
    return {
        "member_id": f"{host}-m",
        "group_instance_id": f"{host}-instance",
        "member_metadata": {"topics": ["clicks"], "user_data": Subscription("p", host).encode()},
        "member_assignment": {
            "assigned_partitions": [{"topic": "clicks", "partitions": partitions}] if partitions else [],
            "user_data": roles.encode(),
        },
    }


def test_the_roles_say_the_warmups_left_and_what_each_pod_still_runs() -> None:
    t = [TaskId(0, p) for p in range(4)]
    group = {
        "members": [
            _described("app-blue-0", Roles(active=frozenset(t[:2]), warmup=frozenset({t[3]})), [0, 1]),
            # the leader moved t3 away; the member has not released its partition yet
            _described("app-blue-1", Roles(standby=frozenset({t[0]})), [3]),
            _described("app-blue-2", Roles(active=frozenset(t[2:])), [2]),
        ]
    }
    roles = roles_from(group)
    assert roles == GroupRoles(3, 1, {"app-blue-0": 2, "app-blue-1": 1, "app-blue-2": 2})
    assert roles.actives_on({"app-blue-1", "app-blue-2"}) == 3
    released = {"members": [group["members"][0], _described("app-blue-1", Roles(), []), group["members"][2]]}
    after = roles_from(released)
    assert after is not None and after.actives_on({"app-blue-1"}) == 0


@pytest.mark.parametrize(
    "group",
    [
        {"members": []},
        {"members": [{"member_id": "joining", "member_assignment": b""}]},  # a rebalance in progress
        {"members": [_described("app-blue-0", Roles(), []), {"member_id": "x", "member_assignment": {}}]},
    ],
)
def test_no_roles_while_any_member_has_no_baton_assignment(group: dict[str, Any]) -> None:
    assert roles_from(group) is None
