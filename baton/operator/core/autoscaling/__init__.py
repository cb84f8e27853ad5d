"""Autoscaling (``spec.autoscaling``): how many Pods the active color needs, and the steps there.

Two pure parts, fed and carried out by the reconciler like :mod:`.deploy`:

* :func:`decide` turns one sample of the workers' metrics into a replica count. The load
  sets it, not a fixed step::

      capacity  = sum(records/s processed) / sum(busy fraction)      per Pod, fully busy
      steady    = input rate / (capacity x targetUtilization)
      drain     = (input rate + lag over its target / drainSeconds) / capacity
      needed    = max(steady, drain)      replicas: ceil(needed), see tolerance below

  then HPA-style stabilisation (scale out to the lowest recommendation of the scale-up
  window, in to the highest of the scale-down window, and a window counts only once the
  recommendations cover it), the HPA's step policies, and the bounds: ``minReplicas`` ..
  ``maxReplicas``, no more Pods than tasks (a task runs in one process), never fewer than
  ``standbyReplicas + 1`` (a task's copies need distinct members). ``tolerance`` is a dead
  band: the count moves only when it is outside ``ceil(needed) .. ceil(needed x (1 +
  tolerance))``, and then to the band's middle, so samples within about +-tolerance/4 of
  each other never move it again (at a steady rate it changes at most once). Lag counts per task:
  a task over its target (``lagRecords``; ``lagSeconds`` or ``latencyP99Seconds`` times its
  input rate) adds its excess to drain, unless it processes nothing at all (restoring,
  moving: more Pods would not help it). A p99 over ``latencyP99Seconds`` forbids scaling in.
  Deploys and flips hold the decision (recommendations are still recorded, so the windows
  are full when the hold ends).

* :func:`autoscale` is one reconcile pass: the scaling step as a state machine, with the
  deploy machine's phase as an input::

      Idle --desired > current--> ScalingOut --Pods Ready--> WarmingUp --members in the group,
                                  (StatefulSet at the new count)        no warmups left--> Idle
      Idle --desired < current--> Draining --their actives moved--> Removing --Pods gone--> Idle
                                  (the Pods to go are marked;       (StatefulSet at the
                                   their tasks go to standby holders) new count)

  New members warm up before they own (the assignor's warmups), so no partition waits for a
  restore; Pods leave only once they own no active task, and stay marked until they are
  gone; a drain whose target the load no longer supports is cancelled. No step starts,
  moves or ends while a flip runs; a deploy holds new steps, and its flip waits for a
  running one, every flip for its target to finish removing Pods (:func:`flip_hold`); a
  step of a color that stopped being active ends. Only the active
  color scales; the idle color follows at deploy time (it gets the active color's count when
  a deploy brings it a revision) and is never left below its own standby floor.

The package: :mod:`.policy` (``spec.autoscaling``), :mod:`.sample` (the metrics and the
formula), :mod:`.offsets` (the operator's sample from consumer offsets), :mod:`.pods` (the
Pods' busy fraction, processed rate and p99 from two scrapes of their /metrics), :mod:`.decide`,
:mod:`.state` and :mod:`.steps` (the pass), :mod:`.status`. Nothing here reads a clock,
Kubernetes or Kafka: tests/unit/operator/core/test_autoscaling_decision.py,
test_autoscaling_offsets.py, test_autoscaling_pods.py and test_autoscaling_model.py drive
every path; the reconciler (``baton.operator.reconcile._autoscale``) feeds it and carries
out its passes.
"""

from __future__ import annotations

from .decide import (
    Bounds,
    Decision,
    bounds,
    decide,
    stabilise,
    standby_floor,
    step_limit,
    with_scale_event,
)
from .offsets import (
    Offsets,
    OffsetsReading,
    sample_from_offsets,
    task_count,
)
from .pods import (
    PodReading,
    pod_sample,
    pod_samples,
    with_pods,
)
from .policy import (
    DEFAULT_SCALE_DOWN,
    DEFAULT_SCALE_UP,
    DEPLOY_PHASES,
    EPS,
    FLIP_PHASES,
    IDLE_REQUEUE_S,
    MIN_TOTAL_UTILIZATION,
    STEP_REQUEUE_S,
    AutoscalingPolicy,
    DeployPhase,
    HeldBy,
    ScalingRules,
    StepPhase,
    StepPolicy,
)
from .sample import (
    Load,
    PodSample,
    Recommended,
    Sample,
    TaskSample,
    allowed_lag,
    measure,
    recommend,
)
from .state import (
    AutoscalingState,
    History,
    Recommendation,
    ScaleEvent,
    Step,
)
from .status import (
    from_status,
    to_status,
)
from .steps import (
    Event,
    Inputs,
    Observed,
    Pass,
    autoscale,
    drain_ordinals,
    flip_hold,
    initial_state,
)

__all__ = [
    "DEFAULT_SCALE_DOWN",
    "DEFAULT_SCALE_UP",
    "DEPLOY_PHASES",
    "EPS",
    "FLIP_PHASES",
    "IDLE_REQUEUE_S",
    "MIN_TOTAL_UTILIZATION",
    "STEP_REQUEUE_S",
    "AutoscalingPolicy",
    "AutoscalingState",
    "Bounds",
    "Decision",
    "DeployPhase",
    "Event",
    "HeldBy",
    "History",
    "Inputs",
    "Load",
    "Observed",
    "Offsets",
    "OffsetsReading",
    "Pass",
    "PodReading",
    "PodSample",
    "Recommendation",
    "Recommended",
    "Sample",
    "ScaleEvent",
    "ScalingRules",
    "Step",
    "StepPhase",
    "StepPolicy",
    "TaskSample",
    "allowed_lag",
    "autoscale",
    "bounds",
    "decide",
    "drain_ordinals",
    "flip_hold",
    "from_status",
    "initial_state",
    "measure",
    "pod_sample",
    "pod_samples",
    "recommend",
    "sample_from_offsets",
    "stabilise",
    "standby_floor",
    "step_limit",
    "task_count",
    "to_status",
    "with_pods",
    "with_scale_event",
]
