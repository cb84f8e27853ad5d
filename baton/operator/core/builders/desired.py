"""Everything the operator applies for one StreamApp, in apply order."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from pydantic.alias_generators import to_camel

from baton.control.messages import Color
from baton.operator.core.builders.env import kafka_client_env
from baton.operator.core.builders.pdb import pod_disruption_budget
from baton.operator.core.builders.rack import DEFAULT_NODE_READER_ROLE, node_reader_binding, zone_aware
from baton.operator.core.builders.service import headless_service
from baton.operator.core.builders.serviceaccount import service_account
from baton.operator.core.builders.snapshots import object_store_env
from baton.operator.core.builders.statefulset import NOT_DEPLOYED, kafka_secret_volumes, statefulset
from baton.operator.core.compaction.cronjob import (
    DEFAULT_COMPACTOR_ROLE,
    DEFAULT_IMAGE,
    compactor_identity,
    cronjob,
)
from baton.operator.core.compaction.sparkapp import scheduled_spark_application
from baton.operator.core.constants import API_VERSION, KIND
from baton.operator.core.deploy_record import DeployRecord
from baton.operator.core.spec import StreamApp, StreamAppSpec


@dataclass(frozen=True)
class ColorRun:
    """What one color runs: the app with that color's spec revision, and its id generation."""

    app: StreamApp
    generation: int = 0

    def application_id(self, color: Color) -> str:
        return self.app.color_application_id(color, self.generation)


def color_runs(app: StreamApp, record: DeployRecord | None) -> dict[Color, ColorRun]:
    """Each color's spec per the deploy record; without one, every color runs the current spec.

    A color keeps the deployed fields (image, env, topology, ...) of its revision, while the
    fields that are not deployed (replicas, upgrade, compaction, paused, deletionPolicy) always
    come from the current spec: scaling and settings apply to both colors at once.
    """
    runs: dict[Color, ColorRun] = {}
    current = app.spec.model_dump(mode="json", by_alias=True)
    for color in app.colors:
        assignment = record.colors.get(color) if record is not None else None
        if assignment is None:
            runs[color] = ColorRun(app)
            continue
        stored = record.specs.get(assignment.revision) if record is not None else None
        if stored is None:
            runs[color] = ColorRun(app, assignment.generation)
            continue
        merged = {**json.loads(stored), **{to_camel(k): current[to_camel(k)] for k in NOT_DEPLOYED}}
        spec = StreamAppSpec.model_validate(merged)
        runs[color] = ColorRun(app.model_copy(update={"spec": spec}), assignment.generation)
    return runs


def _body(app: StreamApp) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": app.name, "namespace": app.namespace}
    if app.uid is not None:
        meta["uid"] = app.uid
    spec = app.spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": meta, "spec": spec}


def desired_objects(
    app: StreamApp,
    runs: dict[Color, ColorRun] | None = None,
    *,
    flip_in_progress: bool = False,
    compactor_image: str = DEFAULT_IMAGE,
    node_reader_role: str = DEFAULT_NODE_READER_ROLE,
    compactor_role: str = DEFAULT_COMPACTOR_ROLE,
) -> list[dict[str, Any]]:
    """ServiceAccount first (Pods need it), and its ClusterRoleBinding to ``node_reader_role``
    while a color runs with spec.rack (before the Pods that read their Node); then per color:
    Service, PDB, StatefulSet; then the compactor's ServiceAccount, RoleBinding (to ``compactor_role``) and CronJob
    or ScheduledSparkApplication (suspended while a flip is in progress)."""
    runs = runs or color_runs(app, None)
    account = service_account(app)
    objects: list[dict[str, Any]] = [] if account is None else [account]
    if any(zone_aware((runs.get(c) or ColorRun(app)).app) for c in app.colors):
        objects.append(node_reader_binding(app, node_reader_role))
    for color in app.colors:
        run = runs.get(color) or ColorRun(app)
        objects += [
            headless_service(app, color),
            pod_disruption_budget(app, color),
            statefulset(run.app, color, generation=run.generation),
        ]
    body = _body(app)
    ids = [(runs.get(c) or ColorRun(app)).application_id(c) for c in app.colors]
    build = scheduled_spark_application if app.spec.compaction.runner == "SparkOperator" else cronjob
    job = build(
        body,
        flip_in_progress=flip_in_progress,
        application_ids=ids,
        extra_env=kafka_client_env(app) + object_store_env(app),
        extra_volumes=kafka_secret_volumes(app),
        default_image=compactor_image,
    )
    if job is not None:
        objects += [*compactor_identity(body, compactor_role), job]
    return objects
