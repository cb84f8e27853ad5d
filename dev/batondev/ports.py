"""The stack's ports, all derived from one base so a second stack can move aside, and the node's address.

Most listen on 127.0.0.1; what Pods on the node reach listens on ``node_ip()`` too."""

from __future__ import annotations

import functools
import os
import socket

BASE = int(os.environ.get("BATON_PORT_BASE", "29090"))

KAFKA = BASE + 2  # PLAINTEXT listener
KAFKA_CONTROLLER = BASE + 3
KAFKA_SCRAM = BASE + 4  # SASL_PLAINTEXT with SCRAM-SHA-512
KAFKA_MTLS = BASE + 5  # SSL, client certificates required (mutual TLS)
KAFKA_SASL_SSL = BASE + 6  # SASL_SSL with SCRAM-SHA-512
KAFKA_OAUTH = BASE + 7  # SASL_SSL with OAUTHBEARER, JWTs from the OIDC server
OIDC = BASE + 8  # Keycloak (HTTP): the OIDC server behind KAFKA_OAUTH
OIDC_MANAGEMENT = BASE + 9  # Keycloak's management interface (health)
ETCD_CLIENT = BASE + 10
ETCD_PEER = BASE + 11
APISERVER = BASE + 20
CONTROLLER_MANAGER = BASE + 21
SCHEDULER = BASE + 22
SPARK_MASTER = BASE + 30  # a standalone Spark cluster: master RPC
SPARK_MASTER_UI = BASE + 31
SPARK_WORKER_UI = BASE + 32  # and BASE + 33: one per worker
S3 = BASE + 40  # MinIO's S3 API
S3_CONSOLE = BASE + 41  # MinIO's console port (its web UI is off); MinIO insists on binding one
KAFKA_NODE = BASE + 12  # PLAINTEXT on the node's address: what Pods on the node bootstrap from
KAFKA_NODE_MTLS = BASE + 13  # mutual TLS on the node's address
KUBELET = BASE + 50  # the kubelet's API (logs, exec, port-forward), on the node's address
KUBELET_HEALTHZ = BASE + 51
KUBE_PROXY_HEALTHZ = BASE + 52
KUBE_PROXY_METRICS = BASE + 53
COREDNS_HEALTH = BASE + 54
PROMETHEUS = BASE + 60  # a test's Prometheus server (dev/batondev/prometheus.py), its HTTP API


@functools.cache
def node_ip() -> str:
    """The address of the interface with the default route: where Pods on the node reach the stack.

    The kubelet refuses a loopback node IP. A UDP socket "connected" to an address beyond the
    default route makes the kernel choose that interface's address; no packet is sent, and
    no tool (``ip``) needs to be on PATH, which a test of a missing tool takes away."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))  # TEST-NET-3: never a real peer
        except OSError as exc:
            raise RuntimeError(
                f"no default route on this machine ({exc}): the node needs the address of one (ip -4 route)"
            ) from exc
        address = str(probe.getsockname()[0])
    if address.startswith("127."):
        raise RuntimeError("the default route leaves through loopback: the node needs another address")
    return address
