"""The operator's object cache and its apply-only-what-differs check (issue 18), without a cluster."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from baton.operator.cache import ObjectCache
from baton.operator.core import drift
from baton.operator.core.builders import desired_objects
from baton.operator.core.drift import ANNOTATION_APPLIED, contains, stamped, up_to_date
from baton.operator.kube import MANAGED_KINDS
from tests.support.samples import app

pytestmark = pytest.mark.unit


def sts(rv: str, replicas: int = 3, uid: str = "u-app", name: str = "x-blue") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": "apps",
            "resourceVersion": rv,
            "ownerReferences": [{"uid": uid, "controller": True, "kind": "StreamApp", "name": "x"}],
            "managedFields": [{"manager": "baton-operator"}],
        },
        "spec": {"replicas": replicas},
    }


def test_newer_versions_win_whatever_order_they_arrive_in() -> None:
    cache = ObjectCache(MANAGED_KINDS)
    cache.observe(sts("20", replicas=5))  # the answer to our apply
    cache.observe(sts("19", replicas=3))  # the watch event of an older write, arriving late
    got = cache.get("apps/v1", "StatefulSet", "x-blue", "apps")
    assert got is not None and got["spec"]["replicas"] == 5
    assert "managedFields" not in got["metadata"], "kept slim"
    got["spec"]["replicas"] = 99  # a copy: callers cannot change the cache
    assert cache.get("apps/v1", "StatefulSet", "x-blue", "apps")["spec"]["replicas"] == 5  # type: ignore[index]


def test_a_deleted_object_is_not_brought_back_by_an_older_event() -> None:
    cache = ObjectCache(MANAGED_KINDS)
    cache.observe(sts("20"))
    cache.observe(sts("21"), deleted=True)
    cache.observe(sts("20"))  # a late event from before the deletion
    assert cache.get("apps/v1", "StatefulSet", "x-blue", "apps") is None
    cache.observe(sts("30"))  # recreated
    assert cache.get("apps/v1", "StatefulSet", "x-blue", "apps") is not None


def test_owned_by_uid_and_namespace_and_what_the_cache_covers() -> None:
    cache = ObjectCache(MANAGED_KINDS)
    cache.observe(sts("1"))
    cache.observe(sts("2", name="x-green"))
    cache.observe(sts("3", name="other", uid="u-other"))
    assert sorted(o["metadata"]["name"] for o in cache.owned("u-app", "apps")) == ["x-blue", "x-green"]
    assert cache.owned("u-app", "elsewhere") == []
    assert cache.covers("apps/v1", "StatefulSet") and cache.covers("v1", "Service")
    assert not cache.covers("v1", "Pod"), "Pods are read when needed, not watched"


def test_every_desired_object_is_up_to_date_once_applied_and_only_then() -> None:
    for desired in desired_objects(app()):
        want = stamped(desired)
        assert want["metadata"]["annotations"][ANNOTATION_APPLIED]
        assert not up_to_date(None, want)
        live = copy.deepcopy(want)
        live["metadata"] |= {"resourceVersion": "7", "uid": "u", "generation": 1}
        live["status"] = {"observedGeneration": 1}  # what the server adds does not matter
        assert up_to_date(live, want), desired["kind"]


def test_drift_a_removed_field_and_a_new_spec_are_all_applied() -> None:
    objects = {o["kind"]: stamped(o) for o in desired_objects(app())}
    want = objects["StatefulSet"]
    live = copy.deepcopy(want)
    live["spec"]["replicas"] = 1  # someone scaled it by hand
    assert not up_to_date(live, want)
    live = copy.deepcopy(want)
    live["metadata"]["labels"]["left-over"] = "x"  # a field the operator no longer sets...
    assert up_to_date(live, want)
    older = copy.deepcopy(want)
    older["metadata"]["annotations"][ANNOTATION_APPLIED] = "0" * 16  # ...is removed by applying a new one
    assert not up_to_date(older, want)
    changed = {o["kind"]: stamped(o) for o in desired_objects(app(replicas=5))}["StatefulSet"]
    assert not up_to_date(live, changed), "a new spec stamps a new hash"


def test_contains_lists_item_by_item() -> None:
    assert contains({"a": [1, {"b": 2, "c": 3}]}, {"a": [1, {"b": 2}]})
    assert not contains({"a": [1, 2, 3]}, {"a": [1, 2]}), "a list item removed is a change"
    assert not contains({"a": "1"}, {"a": 1})


def test_only_a_changed_spark_schedule_asks_for_a_new_next_run() -> None:
    spec: dict[str, Any] = {"schedule": "17 3 * * *", "suspend": False}
    ssa: dict[str, Any] = {"kind": "ScheduledSparkApplication", "spec": spec}
    moved = {**ssa, "spec": {**spec, "schedule": "0 4 * * *"}}
    suspended = {**ssa, "spec": {**spec, "suspend": True}}
    assert drift.schedule_changed(ssa, moved)
    assert not drift.schedule_changed(ssa, suspended)
    cronjob = {**moved, "kind": "CronJob"}  # the CronJob controller recomputes by itself
    assert not drift.schedule_changed({**ssa, "kind": "CronJob"}, cronjob)
