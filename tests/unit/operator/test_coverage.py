"""The operator's standby coverage: read from the group's assignment user data, shown in status."""

from __future__ import annotations

from typing import Any

import pytest

from baton.operator.core.builders.statefulset import spec_hash
from baton.operator.core.status import Observed, compute_status
from baton.operator.coverage import as_status, coverage_from
from baton.worker.assignment.model import StandbyCoverage
from baton.worker.assignment.wire import Roles
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
