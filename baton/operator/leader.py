"""Leader election between operator replicas through a ``coordination.k8s.io/v1`` Lease.

Why a Lease (as controller-runtime, Strimzi and the Flink operator use) and not kopf's
peering: a Lease has a holder, a duration and a renew time the API server stores with
optimistic concurrency, so a replica knows when it may take over and the holder knows when
it must stop. kopf's peering elects by random priorities with no lease and no fencing, and a
paused replica kept exporting its last per-app gauges.

The election itself is the Kubernetes client's (``kubernetes.leaderelection`` with its
``LeaseLock``); this module only wires it to the operator's process:

- a replica runs kopf (every handler, every per-app metric) only once it holds the Lease;
  until then it serves its liveness endpoint and ``baton_operator_leader 0`` and nothing else;
- a leader that cannot renew within ``renew_deadline`` exits at once, before the
  ``lease_duration`` after its last renewal ends, so two replicas never act together
  (a hard exit: kopf's graceful stop would let daemons run on for their cancellation time).
  Kubernetes restarts it, as a follower.

A killed leader stops renewing; another replica takes over once ``lease_duration`` has passed
since the holder's last renewal it observed (``retry_period`` granularity).
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlparse

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

from baton.operator.metrics import METRICS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Timing:
    """The Lease's timing; the defaults are controller-runtime's (15 s, 10 s, 2 s)."""

    lease_duration: int = 15
    renew_deadline: int = 10
    retry_period: int = 2

    def check(self) -> str | None:
        """Why these values cannot work, or None (the client library would sys.exit instead)."""
        if self.retry_period < 1:
            return "--retry-period must be at least 1 second"
        if self.renew_deadline <= 1.2 * self.retry_period:
            return "--renew-deadline must be more than 1.2 x --retry-period"
        if self.lease_duration <= self.renew_deadline:
            return "--lease-duration must be longer than --renew-deadline"
        return None


def identity() -> str:
    """This replica's name in the Lease: the Pod's name in a cluster, unique per process elsewhere."""
    pod = os.environ.get("POD_NAME", "").strip()
    suffix = uuid.uuid4().hex[:6]
    return f"{pod}_{suffix}" if pod else f"{socket.gethostname()}_{os.getpid()}_{suffix}"


class _FollowerHealth(BaseHTTPRequestHandler):
    """Liveness of a replica that waits for the Lease (kopf's own endpoint starts with kopf)."""

    def do_GET(self) -> None:
        body = b"following: waiting for the lease\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Probes every few seconds are not news."""


def _serve_follower_health(liveness: str | None) -> ThreadingHTTPServer | None:
    if not liveness:
        return None
    url = urlparse(liveness)
    server = ThreadingHTTPServer((url.hostname or "0.0.0.0", url.port or 80), _FollowerHealth)
    threading.Thread(target=server.serve_forever, name="follower-health", daemon=True).start()
    return server


def _lost(lease: str) -> None:
    log.error(
        "lost the lease: exiting so that only one operator acts",
        extra={"lease": lease},
    )
    logging.shutdown()
    os._exit(1)  # fencing: no handler, daemon or flip of this process may run on


def wait_until_leader(  # noqa: PLR0917 (one parameter per setting)
    api: client.ApiClient,
    name: str,
    namespace: str,
    me: str,
    timing: Timing,
    liveness: str | None = None,
    on_lost: Callable[[], None] | None = None,
) -> None:
    """Block until this replica holds Lease ``namespace/name``; keep renewing it in a thread.

    Meanwhile ``liveness`` (kopf's endpoint URL, started by kopf once leading) answers for
    the follower. When renewal fails, ``on_lost`` runs (default: exit the process).
    """
    lock = LeaseLock(name, namespace, me)  # type: ignore[no-untyped-call]
    lock.api_instance = client.CoordinationV1Api(api)
    leading = threading.Event()
    config = electionconfig.Config(  # type: ignore[no-untyped-call]
        lock=lock,
        lease_duration=timing.lease_duration,
        renew_deadline=timing.renew_deadline,
        retry_period=timing.retry_period,
        onstarted_leading=leading.set,
        onstopped_leading=on_lost or (lambda: _lost(f"{namespace}/{name}")),
    )
    # the library logs every retry at INFO ("yet to finish lease_duration ..."): keep warnings only
    logging.getLogger("leaderelection").setLevel(logging.WARNING)
    METRICS.leader.set(0)
    health = _serve_follower_health(liveness)
    log.info(
        f"leader election: waiting for lease {namespace}/{name} as {me}",
        extra={"lease": f"{namespace}/{name}", "identity": me},
    )
    election = leaderelection.LeaderElection(config)  # type: ignore[no-untyped-call]
    threading.Thread(target=election.run, name="lease", daemon=True).start()
    leading.wait()
    if health is not None:
        health.shutdown()
        health.server_close()
    METRICS.leader.set(1)
    log.info(
        f"leader election: acquired lease {namespace}/{name} as {me}",
        extra={"lease": f"{namespace}/{name}", "identity": me},
    )
    sys.stderr.flush()
