"""Builders under the deploy record: each color's own spec revision and application id generation."""

from __future__ import annotations

from typing import Any

import pytest

from baton.operator.core.builders import desired_objects
from baton.operator.core.builders.desired import color_runs
from baton.operator.core.builders.statefulset import spec_hash
from baton.operator.core.deploy_record import Assignment, DeployRecord, spec_json
from tests.support.samples import app

pytestmark = pytest.mark.unit


def _env(obj: dict[str, Any]) -> dict[str, str]:
    env = obj["spec"]["template"]["spec"]["containers"][0]["env"]
    return {e["name"]: e.get("value", "") for e in env}


def _by_name(objects: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {f"{o['kind']}/{o['metadata']['name']}": o for o in objects}


def test_old_color_keeps_its_spec_and_rebuilt_color_gets_a_new_generation() -> None:
    old, new = app(image="img:1"), app(image="img:2", replicas=5)
    record = DeployRecord(
        colors={"blue": Assignment(spec_hash(old.spec)), "green": Assignment(spec_hash(new.spec), 2)},
        specs={
            spec_hash(old.spec): spec_json(old.spec.model_dump(mode="json", by_alias=True)),
            spec_hash(new.spec): spec_json(new.spec.model_dump(mode="json", by_alias=True)),
        },
    )
    objects = _by_name(desired_objects(new, color_runs(new, record)))
    blue, green = objects["StatefulSet/click-counter-blue"], objects["StatefulSet/click-counter-green"]
    assert blue["spec"]["template"]["spec"]["containers"][0]["image"] == "img:1"
    assert green["spec"]["template"]["spec"]["containers"][0]["image"] == "img:2"
    # replicas are not deployed: both colors scale with the current spec at once
    assert blue["spec"]["replicas"] == green["spec"]["replicas"] == 5
    assert _env(blue)["BATON_APPLICATION_ID"] == "click-counter-blue"
    assert _env(green)["BATON_APPLICATION_ID"] == "click-counter-green-g2"
    # the control topic is the base id's, whatever the generation
    assert _env(green)["BATON_CONTROL_TOPIC"] == _env(blue)["BATON_CONTROL_TOPIC"] == "click-counter-control"
    assert blue["metadata"]["annotations"]["baton.dev/spec-hash"] == spec_hash(old.spec)


def test_rolling_uses_on_delete_and_blue_green_rolling_update() -> None:
    rolling = _by_name(desired_objects(app(upgrade={"strategy": "Rolling"})))
    assert rolling["StatefulSet/click-counter-blue"]["spec"]["updateStrategy"] == {"type": "OnDelete"}
    bg = _by_name(desired_objects(app()))
    assert bg["StatefulSet/click-counter-green"]["spec"]["updateStrategy"]["type"] == "RollingUpdate"


def test_compaction_cronjob_is_desired_and_suspended_during_a_flip() -> None:
    sample = app(compaction={"enabled": True, "snapshotStore": "s3a://b/snaps"})
    job = _by_name(desired_objects(sample))["CronJob/click-counter-compactor"]
    assert job["spec"]["suspend"] is False
    assert job["metadata"]["ownerReferences"][0]["uid"] == "1234-abcd"
    flipping = _by_name(desired_objects(sample, flip_in_progress=True))["CronJob/click-counter-compactor"]
    assert flipping["spec"]["suspend"] is True
    assert not [o for o in desired_objects(app()) if o["kind"] == "CronJob"]


def test_compaction_follows_each_colors_current_generation() -> None:
    """After a Rebuild the CronJob compacts ``<id>-green-g2``, not the abandoned ``<id>-green``."""
    new = app(compaction={"enabled": True, "snapshotStore": "s3a://b/snaps"})
    record = DeployRecord(
        colors={"blue": Assignment(spec_hash(new.spec)), "green": Assignment(spec_hash(new.spec), 2)},
        specs={spec_hash(new.spec): spec_json(new.spec.model_dump(mode="json", by_alias=True))},
    )
    job = _by_name(desired_objects(new, color_runs(new, record)))["CronJob/click-counter-compactor"]
    args = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    ids = [args[i + 1] for i, a in enumerate(args) if a == "--application-id"]
    assert ids == ["click-counter-blue", "click-counter-green-g2"]
