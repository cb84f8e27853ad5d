"""What each worker process of a pod is: its state directory, member id, host and port.

Process 0 keeps the pod's own identity (its ``state.dir``, its instance id): going from
one process to several, or back, keeps process 0's stores and group membership, so only
the tasks that move to the new processes restore. Process ``i`` ≥ 1 gets
``<state.dir>/processes/<i>`` and instance id ``<instance id>-<i>``: stable across
restarts, so the sticky assignor gives it back its tasks and it finds their stores.
Every process reports the pod as its ``host``, so the assignor keeps a task's standbys
off the pod that runs it when another pod exists.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from baton.worker.config import WorkerConfig, env_var


@dataclass(frozen=True)
class ProcessSlot:
    index: int
    config: WorkerConfig  # the child's whole configuration (processes=1)


def process_state_dir(state_dir: Path, index: int) -> Path:
    return state_dir if index == 0 else state_dir / "processes" / str(index)


def plan(config: WorkerConfig, host: str, ports: list[int]) -> list[ProcessSlot]:
    """The children of a pod running ``config.processes`` workers; ``ports`` are their private metrics ports."""
    if len(ports) != config.processes:
        raise ValueError(f"{config.processes} processes need {config.processes} ports, got {len(ports)}")
    slots = []
    for index, port in enumerate(ports):
        instance_id = config.instance_id
        if instance_id is not None and index > 0:
            instance_id = f"{instance_id}-{index}"
        child = config.model_copy(
            update={
                "processes": 1,
                "state_dir": process_state_dir(config.state_dir, index),
                "metrics_port": port,
                "instance_id": instance_id,
                "host": config.host or host,
            }
        )
        slots.append(ProcessSlot(index, child))
    return slots


def config_env(config: WorkerConfig) -> dict[str, str]:
    """``config`` as the BATON_* variables that make the same WorkerConfig (unset fields left out)."""
    env: dict[str, str] = {}
    for field, value in config.model_dump(mode="json").items():
        if value is None:
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, dict | list):
            text = json.dumps(value, sort_keys=True, separators=(",", ":"))
        else:
            text = str(value)
        env[env_var(field)] = text
    return env
