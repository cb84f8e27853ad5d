"""Everything the operator keeps between passes, in one object that kopf's memo holds.

Why one object and not module globals: the state has an owner with a lifetime (created at
start-up, closed at shutdown, an app's part dropped when the app is deleted), tests can make
as many as they like, and nothing leaks from one operator run into the next in one process.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from baton.operator.core.autoscaling import IDLE_REQUEUE_S, OffsetsReading, PodReading
from baton.operator.core.builders.rack import DEFAULT_NODE_READER_ROLE
from baton.operator.core.compaction.cronjob import DEFAULT_COMPACTOR_ROLE
from baton.operator.core.compaction.cronjob import DEFAULT_IMAGE as DEFAULT_COMPACTOR_IMAGE
from baton.operator.core.deploy import FlipOutcome
from baton.operator.flips import ControlFollower, ControlState
from baton.operator.kube import Kube

# A flip that just ended, handed from the thread that ran it to the next pass of its app:
# (outcome, the status.lastFlip it produced, seconds it took).
FlipResult = tuple[FlipOutcome, dict[str, Any], float]


@dataclass
class OperatorState:
    """The operator's memory: its API connection and cache, its threads and per-app clients
    (a Kafka AdminClient and a control topic follower per app)."""

    kube: Kube
    kafka: bool = True  # manage topics, read lag and the control topic (off: --no-kafka)
    compactor_image: str = DEFAULT_COMPACTOR_IMAGE
    node_reader_role: str = DEFAULT_NODE_READER_ROLE  # zone-aware apps' workers are bound to it
    compactor_role: str = DEFAULT_COMPACTOR_ROLE  # compaction Jobs are bound to it
    # Passes block (Kafka reads, a flip waits for its workers): they run here, never in kopf's
    # event loop, and at most this many at once however many apps there are.
    workers: int = 16
    executor: ThreadPoolExecutor = field(init=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, init=False)
    _locks: dict[str, threading.Lock] = field(default_factory=dict, init=False)
    # One Kafka AdminClient per app and client config: each owns threads and connections.
    _admins: dict[str, tuple[str, Any]] = field(default_factory=dict, init=False)
    _flips: dict[str, FlipResult] = field(default_factory=dict, init=False)
    _flipping: set[str] = field(default_factory=set, init=False)
    _followers: dict[str, ControlFollower] = field(default_factory=dict, init=False)
    # each app's deploy loop: how to wake it from another thread (a StatefulSet became ready)
    _wakers: dict[str, Callable[[], None]] = field(default_factory=dict, init=False)
    # spec.autoscaling: each app's previous offsets reading (rates are differences between
    # two passes), and how often an autoscaled app is looked at (at most; its steps sooner)
    _readings: dict[str, OffsetsReading] = field(default_factory=dict, init=False)
    # and each app's previous scrape of its active Pods' /metrics, by Pod name (pod_metrics.py)
    _pod_readings: dict[str, dict[str, PodReading]] = field(default_factory=dict, init=False)
    # and the Pods each color's control topic was last told to drain (a restarted operator
    # knows none: it writes the set once again)
    _drains: dict[tuple[str, str], frozenset[str]] = field(default_factory=dict, init=False)
    autoscaling_interval: float = field(
        default_factory=lambda: float(os.environ.get("BATON_AUTOSCALING_INTERVAL_SECONDS") or IDLE_REQUEUE_S)
    )

    def __post_init__(self) -> None:
        self.executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="pass")

    def lock(self, app: str) -> threading.Lock:
        """The lock that serialises passes of one app (``namespace/name``)."""
        with self._guard:
            return self._locks.setdefault(app, threading.Lock())

    def admin(self, app: str, fingerprint: str, make: Callable[[], Any]) -> Any:
        """The app's AdminClient for this client config; a new one when the config changed."""
        with self._guard:
            cached = self._admins.get(app)
            if cached is None or cached[0] != fingerprint:
                self._admins[app] = cached = (fingerprint, make())
            return cached[1]

    def control_state(self, app: str, bootstrap: str, topic: str, extra: dict[str, str]) -> ControlState:
        """Who is active for ``app``, from its long-lived control topic follower (one per app;
        a new one when the app's Kafka settings changed, or after the old one failed)."""
        key = (bootstrap, topic, tuple(sorted(extra.items())))
        with self._guard:
            follower = self._followers.get(app)
            if follower is not None and follower.key != key:
                follower.close()
                follower = None
            if follower is None:
                follower = self._followers[app] = ControlFollower(bootstrap, topic, extra)
        try:
            return follower.state()
        except Exception:
            with self._guard:
                if self._followers.get(app) is follower:
                    del self._followers[app]
            follower.close()
            raise

    def on_wake(self, app: str, wake: Callable[[], None] | None) -> None:
        """Register (or, with None, drop) how to wake ``app``'s deploy loop."""
        with self._guard:
            if wake is None:
                self._wakers.pop(app, None)
            else:
                self._wakers[app] = wake

    def wake(self, app: str) -> None:
        """Have ``app``'s deploy loop look now instead of at its next requeue."""
        with self._guard:
            wake = self._wakers.get(app)
        if wake is not None:
            wake()

    def start_flip(self, app: str) -> bool:
        """False when a flip of ``app`` is already running in this process."""
        with self._guard:
            if app in self._flipping:
                return False
            self._flipping.add(app)
            return True

    def end_flip(self, app: str, result: FlipResult | None) -> None:
        with self._guard:
            self._flipping.discard(app)
            if result is not None:
                self._flips[app] = result

    def flip_running(self, app: str) -> bool:
        with self._guard:
            return app in self._flipping

    def take_flip(self, app: str) -> FlipResult | None:
        """The result of the flip that just ended, once (the next pass records it)."""
        with self._guard:
            return self._flips.pop(app, None)

    def swap_reading(self, app: str, reading: OffsetsReading | None) -> OffsetsReading | None:
        """Keep ``reading`` as the app's latest (None: drop it); the one it replaces."""
        with self._guard:
            previous = self._readings.pop(app, None)
            if reading is not None:
                self._readings[app] = reading
            return previous

    def swap_pod_readings(self, app: str, readings: dict[str, PodReading]) -> dict[str, PodReading]:
        """Keep ``readings`` as the app's latest scrape of its Pods; the one it replaces."""
        with self._guard:
            previous = self._pod_readings.pop(app, {})
            if readings:
                self._pod_readings[app] = readings
            return previous

    def drains_changed(self, app: str, color: str, pods: frozenset[str]) -> bool:
        """Whether ``pods`` differs from what the color was last told to drain (then it is
        the new memory: the caller writes it; a failed write calls :meth:`drains_unknown`)."""
        with self._guard:
            if self._drains.get((app, color)) == pods:
                return False
            self._drains[(app, color)] = pods
            return True

    def drains_unknown(self, app: str, color: str) -> None:
        with self._guard:
            self._drains.pop((app, color), None)

    def forget(self, app: str) -> None:
        """The app was deleted: drop its lock, client and results (the client's threads end
        with its last reference)."""
        with self._guard:
            self._locks.pop(app, None)
            self._admins.pop(app, None)
            self._flips.pop(app, None)
            self._readings.pop(app, None)
            self._pod_readings.pop(app, None)
            for key in [k for k in self._drains if k[0] == app]:
                del self._drains[key]
            follower = self._followers.pop(app, None)
        if follower is not None:
            follower.close()

    def close(self) -> None:
        self.executor.shutdown(wait=False, cancel_futures=True)
        with self._guard:
            self._admins.clear()
            followers, self._followers = list(self._followers.values()), {}
        for follower in followers:
            follower.close()
