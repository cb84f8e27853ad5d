"""The user data members and the leader exchange, the fencing identity handed to librdkafka,
and lag arithmetic: pure functions, no server."""

from __future__ import annotations

import sys

import pytest
from confluent_kafka import Consumer

from baton.worker.assignment.membership import lags_from
from baton.worker.assignment.model import UNKNOWN_LAG, StandbyCoverage
from baton.worker.assignment.wire import (
    RUNNING,
    BadUserData,
    Roles,
    Subscription,
    librdkafka_group_metadata,
)
from baton.worker.naming import TaskId

pytestmark = pytest.mark.unit

T0, T1, T2 = TaskId(0, 0), TaskId(0, 1), TaskId(1, 2)


def test_subscription_and_roles_round_trip() -> None:
    sub = Subscription(
        process="w1",
        host="pod-1",
        offsets={T0: 10, T1: RUNNING},
        active=frozenset({T1}),
        standby=frozenset({T0, T2}),
    )
    assert Subscription.decode(sub.encode()) == sub
    # a follow-up rejoin's metadata differs from the same member's last JoinGroup, or the group
    # coordinator answers it with the current generation and no rebalance starts
    following = Subscription("w1", "pod-1", offsets={T0: 10}, followup_of=7)
    assert Subscription.decode(following.encode()) == following
    assert following.encode() != Subscription("w1", "pod-1", offsets={T0: 10}).encode()
    leaving = Subscription("w1", "pod-1", offsets={T0: 10}, draining=True)
    assert Subscription.decode(leaving.encode()) == leaving
    assert not Subscription.decode(Subscription("w1", "pod-1").encode()).draining
    roles = Roles(
        active=frozenset({T0}), standby=frozenset({T1}), warmup=frozenset({T2}), probe_after_ms=5000
    )
    assert Roles.decode(roles.encode()) == roles
    covered = Roles(active=frozenset({T0}), coverage=StandbyCoverage(tasks=3, with_standby=3, caught_up=2))
    assert Roles.decode(covered.encode()) == covered
    assert Roles.decode(b'{"v": 1}').coverage is None  # a worker from before coverage was reported
    moving = Roles(standby=frozenset({T1}), followup=True)
    assert Roles.decode(moving.encode()) == moving and not Roles.decode(b'{"v": 1}').followup
    partial = Roles(incomplete=True)
    assert Roles.decode(partial.encode()) == partial and not Roles.decode(b'{"v": 1}').incomplete


@pytest.mark.parametrize(
    "data", [None, b"", b"not json", b"[]", b'{"v": 99}', b'{"active": []}', b'{"v": 1, "coverage": 3}']
)
def test_unreadable_user_data_is_refused_with_a_reason(data: bytes | None) -> None:
    with pytest.raises(BadUserData):
        Roles.decode(data)


@pytest.mark.parametrize("instance", ["pod-0", None])
def test_group_metadata_bytes_are_librdkafkas_own(instance: str | None) -> None:
    """librdkafka serializes a consumer that never joined as generation -1, member ''."""
    conf = {"group.id": "app-1", "bootstrap.servers": "127.0.0.1:1", "log_level": 0}
    if instance:
        conf["group.instance.id"] = instance
    consumer = Consumer(conf)
    try:
        assert consumer.consumer_group_metadata() == librdkafka_group_metadata("app-1", -1, "", instance)
    finally:
        consumer.close()


def test_group_metadata_carries_generation_and_member() -> None:
    data = librdkafka_group_metadata("g", 7, "m-1", "pod-2")
    assert data.startswith(b"CGMDv2:") and b"g\0m-1\0\0pod-2\0" in data
    assert (
        int.from_bytes(data[7:11], sys.byteorder) == 7
    )  # librdkafka copies the int32 as the machine holds it


def test_lags_from_offset_sums_and_changelog_ends() -> None:
    parts = {T0: [("cl-a", 0), ("cl-b", 0)], T1: [("cl-a", 1), ("cl-b", 1)]}
    ends = {("cl-a", 0): 100, ("cl-b", 0): 50, ("cl-a", 1): 10}
    reports = {
        "m1": Subscription("w1", "h1", offsets={T0: 140, T1: RUNNING}),
        "m2": Subscription("w2", "h2", offsets={T0: -1, T1: 3}),
    }
    lags = lags_from(reports, ends, lambda t: parts[t])
    assert lags == {"m1": {T0: 10, T1: 0}, "m2": {T0: UNKNOWN_LAG, T1: UNKNOWN_LAG}}  # cl-b/1 end unknown
    assert lags_from(reports, None, lambda t: parts[t])["m1"] == {T0: 0, T1: 0}
    # no state at all: as far behind as the changelogs are long (caught up while they are empty)
    fresh = {"m3": Subscription("w3", "h3")}
    assert lags_from(fresh, ends, lambda t: parts[t], [T0, T1]) == {"m3": {T0: 150}}
    assert lags_from(fresh, None, lambda t: parts[t], [T0, T1]) == {"m3": {}}
