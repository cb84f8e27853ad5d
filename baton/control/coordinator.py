"""Runs one flip over the control topic: prepare, collect reports, commit or abort, await drain.

Used by ``baton flip`` and by the operator; it needs only Kafka. Its decisions come from
:class:`baton.control.flipper.FlipAttempt`; this module only moves records.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient

from .channel import ControlReader, ControlWriter, control_topic, ensure_control_topic
from .flipper import FlipAttempt
from .messages import STATE_KEY, Abort, ActiveState, Color, Commit, Drained, Prepare, Report, TopicPartition

log = logging.getLogger("baton.control")


@dataclass
class FlipResult:
    epoch: int
    to: Color
    committed: bool
    reason: str = ""
    cut: dict[TopicPartition, int] = field(default_factory=dict)
    pending: list[TopicPartition] = field(default_factory=list)
    pause_ms: float = 0.0  # prepare written -> commit/abort written
    drained_ms: float = 0.0  # commit written -> last Drained seen (0 when nothing was pending)


def current_state(messages: list[object]) -> tuple[ActiveState, int]:
    """The state in force and the highest epoch ever used (prepared, committed or aborted)."""
    state = ActiveState(0, "blue")
    top = 0
    for msg in messages:
        if isinstance(msg, ActiveState) and msg.epoch >= state.epoch:
            state = msg
        elif isinstance(msg, Commit) and msg.state.epoch >= state.epoch:
            state = msg.state
        epoch = getattr(msg, "epoch", None)
        if isinstance(msg, Commit):
            epoch = msg.state.epoch
        if isinstance(epoch, int):
            top = max(top, epoch)
    return state, top


def _partitions(bootstrap: str, topics: set[str], extra: dict[str, str]) -> frozenset[TopicPartition]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **extra})
    md = admin.list_topics(timeout=10)
    return frozenset((t, p) for t in topics for p in md.topics[t].partitions)


def flip(
    bootstrap: str,
    application_id: str,
    to: Color,
    *,
    deadline_s: float = 10.0,
    drain_timeout_s: float = 60.0,
    extra: dict[str, str] | None = None,
) -> FlipResult:
    """Flip ``application_id`` so that ``to`` becomes active; returns what happened."""
    extra = extra or {}
    topic = control_topic(application_id)
    ensure_control_topic(bootstrap, topic, extra)
    writer = ControlWriter(bootstrap, topic, f"{application_id}-flip-coordinator", extra)
    reader = ControlReader(bootstrap, topic, extra)
    try:
        state, top = current_state(list(reader.read_to_end()))
        epoch = top + 1
        if state.active == to:
            return FlipResult(epoch=state.epoch, to=to, committed=False, reason=f"{to} is already active")
        prepare = Prepare(epoch, to, int(time.time() * 1000 + deadline_s * 1000))
        started = time.monotonic()
        writer.write((prepare.key(), prepare.encode()))
        log.info("flip prepared", extra={"app": application_id, "epoch": epoch, "to": to})
        attempt: FlipAttempt | None = None
        reports: list[Report] = []
        decision: Commit | Abort | None = None
        while decision is None:
            for msg in reader.poll(0.05):
                if isinstance(msg, Report) and msg.epoch == epoch:
                    reports.append(msg)
                    if attempt is None and msg.sources:
                        attempt = FlipAttempt(prepare, _partitions(bootstrap, set(msg.sources), extra), state)
                        for r in reports[:-1]:
                            attempt.on_report(r)
                    if attempt is not None:
                        attempt.on_report(msg)
            now_ms = int(time.time() * 1000)
            if attempt is not None:
                decision = attempt.decision(now_ms)
            elif now_ms > prepare.deadline_ms:
                decision = Abort(epoch, "no worker reported a position before the deadline")
        if isinstance(decision, Abort):
            writer.write((decision.key(), decision.encode()))
            pause = (time.monotonic() - started) * 1000
            log.warning(
                "flip aborted", extra={"app": application_id, "epoch": epoch, "reason": decision.reason}
            )
            return FlipResult(epoch, to, committed=False, reason=decision.reason, pause_ms=pause)
        new = decision.state
        writer.write((decision.key(), decision.encode()), (STATE_KEY, new.encode()))
        pause = (time.monotonic() - started) * 1000
        log.info(
            "flip committed",
            extra={
                "app": application_id,
                "epoch": epoch,
                "to": to,
                "pending": len(new.pending),
                "pause_ms": round(pause, 1),
            },
        )
        drained_ms = _await_drain(reader, new, drain_timeout_s) if new.pending else 0.0
        return FlipResult(
            epoch,
            to,
            committed=True,
            cut=dict(new.cut),
            pending=sorted(new.pending),
            pause_ms=pause,
            drained_ms=drained_ms,
        )
    finally:
        reader.close()
        writer.close()


def _await_drain(reader: ControlReader, state: ActiveState, timeout_s: float) -> float:
    started = time.monotonic()
    waiting = set(state.pending)
    while waiting:
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"old active did not drain {sorted(waiting)} within {timeout_s}s")
        for msg in reader.poll(0.1):
            if isinstance(msg, Drained) and msg.epoch == state.epoch:
                waiting.discard(msg.tp)
    return (time.monotonic() - started) * 1000
