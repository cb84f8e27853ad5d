"""Headless Services: stable DNS names for the Pods of a color and a target for metrics scraping."""

from __future__ import annotations

from typing import Any

from baton.control.messages import Color
from baton.operator.core.builders.common import color_name, metadata, selector_labels
from baton.operator.core.constants import METRICS_PORT_NAME
from baton.operator.core.spec import StreamApp


def headless_service(app: StreamApp, color: Color) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(app, color_name(app, color), color),
        "spec": {
            "clusterIP": "None",
            "selector": selector_labels(app, color),
            # Restoring Pods are not Ready, but their metrics (restore progress) must be scraped.
            "publishNotReadyAddresses": True,
            "ports": [
                {
                    "name": METRICS_PORT_NAME,
                    "port": app.spec.worker.metrics_port,
                    "targetPort": METRICS_PORT_NAME,
                    "protocol": "TCP",
                }
            ],
        },
    }
