"""The worker's zone from its Kubernetes Node's label (Strimzi's rack awareness).

The downward API gives a container its Node's name (``spec.nodeName``) but not the Node's
labels, so a worker of a StreamApp with ``spec.rack`` reads the label once at start through
the Kubernetes API, with the Pod's projected ServiceAccount token; the operator binds that
ServiceAccount to a ClusterRole that may ``get`` Nodes and nothing else.

A zone only improves placement (standbys in other zones first, ``client.rack``), so nothing
here stops a worker: a Node without the label, a refused or failed request, or a missing
Kubernetes client each log one warning that says what to fix, and the worker runs without a
zone. Errors that may pass (the API server busy, RBAC not yet propagated right after the
operator created the binding) are retried for a few seconds first.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from urllib3.util.retry import Retry

from baton.worker.config import WorkerConfig

log = logging.getLogger(__name__)

# answers that may change on their own: RBAC propagating, throttling, the API server restarting;
# urllib3 retries them (and connection errors) 4 times, 0 + 1 + 2 + 4 s apart, before the
# worker runs without a zone
RETRY = Retry(
    total=4,
    backoff_factor=0.5,
    status_forcelist=(403, 429, 500, 502, 503, 504),
    allowed_methods=frozenset({"GET"}),
    raise_on_status=False,
)


@dataclass(frozen=True)
class NodeZone:
    """What the lookup found: the zone, or why there is none."""

    zone: str | None
    problem: str | None = None


def api_client(retries: Retry | int = RETRY) -> Any:
    """A client of the API server: in a Pod its ServiceAccount token (the projected volume at the
    standard path), elsewhere the kubeconfig (``KUBECONFIG``, ~/.kube/config)."""
    from kubernetes import client, config

    configuration = client.Configuration()
    configuration.retries = retries
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration)


def node_zone(node_name: str, label: str, api: Any | None = None) -> NodeZone:
    """The value of ``label`` on Node ``node_name``, or None and the reason."""
    try:
        from kubernetes import client
        from kubernetes.client.exceptions import ApiException
    except ImportError:
        return NodeZone(
            None, "the kubernetes package is not installed (pip install 'baton-streams[operator]')"
        )
    try:
        core = client.CoreV1Api(api if api is not None else api_client())
    except Exception as exc:  # no token, no kubeconfig: not in a Pod with the projected token
        return NodeZone(None, f"no Kubernetes credentials: {exc}")
    try:
        node = core.read_node(node_name, _request_timeout=(3, 5))  # (connect, read) seconds
    except ApiException as exc:
        problem = f"reading Node {node_name} was answered {exc.status} {exc.reason}"
        if exc.status == 403:
            problem += (
                ": the worker's ServiceAccount may not get Nodes (the operator binds it to its "
                "node-reader ClusterRole; see docs/operations.md, Zones and placement)"
            )
        return NodeZone(None, problem)
    except Exception as exc:  # connection refused, TLS, timeouts (after the client's retries)
        return NodeZone(None, f"reading Node {node_name} failed: {exc}")
    value = ((node.metadata.labels if node.metadata else None) or {}).get(label)
    if not value:
        return NodeZone(None, f"Node {node_name} has no label {label}")
    return NodeZone(str(value))


def with_node_zone(config: WorkerConfig, api: Any | None = None) -> WorkerConfig:
    """``config`` with its zone read from its Node when it names a label and no zone.

    The config handed on names no label any more, so ``--processes N`` children (which get the
    parent's config) do not repeat the lookup, or its warning.
    """
    if config.zone or not config.zone_node_label or not config.node_name:
        return config
    found = node_zone(config.node_name, config.zone_node_label, api)
    if found.zone is None:
        log.warning(
            "running without a zone: standbys avoid only their active's pod, consumers set no client.rack",
            extra={"node": config.node_name, "label": config.zone_node_label, "reason": found.problem},
        )
    else:
        log.info("zone from the node", extra={"node": config.node_name, "zone": found.zone})
    return config.model_copy(update={"zone": found.zone, "zone_node_label": None})
