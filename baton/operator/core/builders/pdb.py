"""PodDisruptionBudget per color: node drains take one worker of a color at a time.

One worker down means one rebalance whose tasks the standbys take over quickly; several at
once could leave tasks without a warm copy.
"""

from __future__ import annotations

from typing import Any

from baton.control.messages import Color
from baton.operator.core.builders.common import color_name, metadata, selector_labels
from baton.operator.core.spec import StreamApp


def pod_disruption_budget(app: StreamApp, color: Color) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(app, color_name(app, color), color),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector_labels(app, color)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }
