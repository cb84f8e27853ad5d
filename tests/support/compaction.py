"""A StreamApp object as the operator hands it to the compactor's pure builders."""

from __future__ import annotations

from typing import Any


def streamapp(compaction: dict[str, Any], pod_template: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "image": "img:1",
        "topology": "examples.click_counter:topology",
        "applicationId": "cc",
        "kafka": {"bootstrapServers": "k:9092"},
        "compaction": compaction,
    }
    if pod_template is not None:
        spec["podTemplate"] = pod_template
    return {
        "apiVersion": "baton.dev/v1alpha1",
        "kind": "StreamApp",
        "metadata": {"name": "clicks", "namespace": "ns", "uid": "u-1"},
        "spec": spec,
    }
