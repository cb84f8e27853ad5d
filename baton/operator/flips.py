"""The operator's side of the flip protocol: read who is active, run a flip, report it.

The flip itself is :func:`baton.control.coordinator.flip`, the same coordinator that
``baton flip`` uses; this module adapts its inputs (the app's Kafka settings) and its result
(``status.lastFlip``, the deploy machine's :class:`~baton.operator.core.deploy.FlipOutcome`).
It blocks for up to the flip deadline: the reconciler calls it from a worker thread, never
from kopf's event loop.
"""

from __future__ import annotations

import datetime
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from baton.control.channel import ControlReader, write_once
from baton.control.coordinator import FlipResult, fold
from baton.control.coordinator import flip as run_flip
from baton.control.messages import Color, Draining, Message, tp_str
from baton.operator.core.deploy import FlipOutcome

log = logging.getLogger(__name__)

# The coordinator's default: both colors pause at most this long before an abort.
DEADLINE_S = 10.0
# librdkafka settings that belong to the operator's AdminClient only.
_ADMIN_ONLY = {"bootstrap.servers", "client.id", "socket.timeout.ms"}


@dataclass(frozen=True)
class ControlState:
    active: Color
    epoch: int
    # partitions the old active has not drained below the cut yet: no flip, and no new
    # revision for the idle color, until it has (its range would be lost or emitted twice)
    draining: tuple[str, ...] = ()


def client_extra(admin_config: dict[str, Any]) -> dict[str, str]:
    """Security settings for the coordinator's clients, from the AdminClient's config."""
    return {k: str(v) for k, v in admin_config.items() if k not in _ADMIN_ONLY}


def write_draining(
    bootstrap: str, topic: str, extra: dict[str, str], color: Color, pods: frozenset[str]
) -> None:
    """The color's Pods that go in a scale-in (empty: none), for its workers (see ``Draining``)."""
    record = Draining(color, pods)
    write_once(bootstrap, topic, (record.key(), record.encode()), extra)


def read_state(bootstrap: str, topic: str, extra: dict[str, str], timeout_s: float = 10.0) -> ControlState:
    """The emission rule in force, from the control topic (blue, epoch 0 when it is empty),
    with a consumer of its own (after a failed flip; passes use a :class:`ControlFollower`)."""
    reader = ControlReader(bootstrap, topic, extra)
    try:
        return state_of(reader.read_to_end(timeout_s))
    finally:
        reader.close()


def state_of(messages: list[Message]) -> ControlState:
    gate = fold(messages)
    return ControlState(gate.state.active, gate.state.epoch, tuple(tp_str(tp) for tp in gate.undrained()))


class ControlFollower:
    """One app's control topic, followed by one long-lived consumer across passes.

    A pass used to open a consumer, read the topic from its beginning and close it: a
    connection, a metadata request and a full read per app every 30 s. This keeps the
    consumer and what it has read; a pass asks the broker for the end offset and reads only
    what is new. Folding everything read since the start is what a fresh read from the
    beginning folds (compaction only drops records a later one supersedes).
    """

    def __init__(self, bootstrap: str, topic: str, extra: dict[str, str]) -> None:
        self.key = (bootstrap, topic, tuple(sorted(extra.items())))
        self._reader = ControlReader(bootstrap, topic, extra)
        self._messages: list[Message] = []
        self._lock = threading.Lock()

    def state(self, timeout_s: float = 10.0) -> ControlState:
        with self._lock:
            if not self._reader.caught_up:
                self._messages.extend(self._reader.read_to_end(timeout_s))
            else:
                self._messages.extend(self._reader.catch_up(timeout_s))
            return state_of(self._messages)

    def close(self) -> None:
        with self._lock:
            self._reader.close()


def flip(
    bootstrap: str, application_id: str, to: Color, extra: dict[str, str]
) -> tuple[FlipOutcome, dict[str, Any], float]:
    """Run one flip; (outcome for the machine, ``status.lastFlip``, seconds it took).

    A flip to the color already active (a replay after an operator restart) is reported as
    committed with the epoch in force: it happened, once. A flip whose old active did not
    drain in time is committed and says so (``draining``); the deploy machine then waits for
    the drain before anything else (:func:`baton.operator.core.deploy.plan`).
    """
    started = time.monotonic()
    result: FlipResult | None = None
    try:
        result = run_flip(bootstrap, application_id, to, deadline_s=DEADLINE_S, extra=extra)
        error = ""
    except Exception as exc:  # Kafka trouble, or the old color did not drain in time
        log.warning("flip of %s to %s failed: %s", application_id, to, exc)
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.monotonic() - started
    if result is None:
        try:
            state = read_state(bootstrap, f"{application_id}-control", extra)
        except Exception:
            state = None
        committed = state is not None and state.active == to
        draining = bool(state.draining) if state is not None else False
        outcome = FlipOutcome(to, committed, state.epoch if state else 0, error, draining=draining)
        return outcome, _last_flip(outcome, None, seconds), seconds
    already = not result.committed and result.reason.endswith("is already active")
    outcome = FlipOutcome(
        to,
        result.committed or already,
        result.epoch,
        result.reason,
        # a topology that cannot flip exactly; "still draining" passes, so retrying helps
        refused="refuses the flip" in result.reason and "still draining" not in result.reason,
        draining=result.committed and not result.drained,
    )
    return outcome, _last_flip(outcome, result, seconds), seconds


def _last_flip(outcome: FlipOutcome, result: FlipResult | None, seconds: float) -> dict[str, Any]:
    out: dict[str, Any] = {
        "epoch": outcome.epoch,
        "from": "green" if outcome.to == "blue" else "blue",
        "to": outcome.to,
        "committed": outcome.committed,
        "at": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    if outcome.reason:
        out["reason"] = outcome.reason[:500]
    if result is not None and result.committed:
        out["pauseMs"] = round(result.pause_ms, 1)
        out["drainedMs"] = round(result.drained_ms, 1)
        out["cut"] = {tp_str(tp): off for tp, off in sorted(result.cut.items())}
        out["pending"] = [tp_str(tp) for tp in result.pending]
        out["drained"] = result.drained
    elif result is None:
        out["pauseMs"] = round(seconds * 1000, 1)
    return out
