"""Runs one flip over the control topic: prepare, collect reports, commit or abort, await drain.

The decision is the first Commit or Abort of the epoch in the control topic, so after
writing its own the coordinator reads the topic back: a worker that gave up waiting may
have aborted first, and then the flip did not happen, whatever the coordinator wrote.

Used by ``baton flip`` and by the operator; it needs only Kafka. Its decisions come from
:class:`baton.control.flipper.FlipAttempt`; this module only moves records.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

from confluent_kafka.admin import AdminClient

from .channel import ControlReader, ControlWriter, control_topic, ensure_control_topic
from .flipper import FlipAttempt, prepare_refusal
from .gate import Gate
from .messages import (
    STATE_KEY,
    Abort,
    ActiveState,
    Color,
    Commit,
    Message,
    Prepare,
    Report,
    TopicPartition,
    other,
    tp_str,
)

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
    # False: committed, but the old active had not emitted everything below the cut when the
    # coordinator stopped waiting; no flip can be prepared until it has
    drained: bool = True


def fold(messages: list[Message]) -> Gate:
    """The control topic's records folded as any reader folds them (first decision wins)."""
    gate = Gate("blue")
    for msg in messages:
        gate.apply(msg)
    return gate


def current_state(messages: list[Message]) -> tuple[ActiveState, int]:
    """The state in force and the highest epoch ever used (prepared, committed or aborted)."""
    gate = fold(messages)
    return gate.state, gate.top_epoch


def _partitions(bootstrap: str, topics: set[str], extra: dict[str, str]) -> frozenset[TopicPartition]:
    admin = AdminClient({"bootstrap.servers": bootstrap, **extra})
    md = admin.list_topics(timeout=10)
    return frozenset((t, p) for t in topics for p in md.topics[t].partitions)


# How long the coordinator waits to read its own decision back from the control topic.
DECISION_READ_TIMEOUT_S = 30.0


def flip(
    bootstrap: str,
    application_id: str,
    to: Color,
    *,
    deadline_s: float = 10.0,
    drain_timeout_s: float = 60.0,
    extra: dict[str, str] | None = None,
) -> FlipResult:
    """Flip ``application_id`` so that ``to`` becomes active; returns what happened.

    ``deadline_s`` is how long the workers may take to report; it is measured on this
    process's monotonic clock only. A flip is refused while the previous one still drains.
    """
    extra = extra or {}
    topic = control_topic(application_id)
    ensure_control_topic(bootstrap, topic, extra)
    writer = ControlWriter(bootstrap, topic, f"{application_id}-flip-coordinator", extra)
    reader = ControlReader(bootstrap, topic, extra)
    try:
        gate = fold(reader.read_to_end())
        state = gate.state
        if state.active == to:
            return FlipResult(epoch=state.epoch, to=to, committed=False, reason=f"{to} is already active")
        refusal = prepare_refusal(state, gate.drained)
        if refusal:
            log.warning("flip refused", extra={"app": application_id, "to": to, "reason": refusal})
            return FlipResult(epoch=state.epoch, to=to, committed=False, reason=refusal)
        stale = gate.pending_prepare()
        if stale is not None:  # a coordinator stopped mid-flip: close its epoch before a new one
            gone = Abort(stale.epoch, "its coordinator stopped before deciding")
            writer.write((gone.key(), gone.encode()))
        epoch = gate.top_epoch + 1
        prepare = Prepare(epoch, to, int(deadline_s * 1000))
        started = time.monotonic()
        writer.write((prepare.key(), prepare.encode()))
        log.info("flip prepared", extra={"app": application_id, "epoch": epoch, "to": to})
        decision = _decide(bootstrap, reader, gate, prepare, state, started, extra)
        if decision is not None:
            records = [(decision.key(), decision.encode())]
            if isinstance(decision, Commit):
                records.append((STATE_KEY, decision.state.encode()))
            writer.write(*records)
        first = _first_decision(reader, gate, epoch)  # ours, unless a worker's Abort came first
        pause = (time.monotonic() - started) * 1000
        if isinstance(first, Abort):
            log.warning("flip aborted", extra={"app": application_id, "epoch": epoch, "reason": first.reason})
            return FlipResult(epoch, to, committed=False, reason=first.reason, pause_ms=pause)
        new = first.state
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
        waiting = _await_drain(reader, gate, drain_timeout_s)
        result = FlipResult(
            epoch,
            to,
            committed=True,
            cut=dict(new.cut),
            pending=sorted(new.pending),
            pause_ms=pause,
            drained_ms=waiting[0],
            drained=not waiting[1],
        )
        if waiting[1]:
            result.reason = (
                f"committed, but {other(to)} has not emitted everything below the cut of "
                f"{', '.join(tp_str(tp) for tp in waiting[1])} within {drain_timeout_s:.0f}s; "
                "no flip can run until it has"
            )
            log.warning(
                "flip not drained", extra={"app": application_id, "epoch": epoch, "reason": result.reason}
            )
        return result
    finally:
        reader.close()
        writer.close()


def _decide(  # noqa: PLR0917
    bootstrap: str,
    reader: ControlReader,
    gate: Gate,
    prepare: Prepare,
    state: ActiveState,
    started: float,
    extra: dict[str, str],
) -> Commit | Abort | None:
    """Collect reports until the attempt decides; None if a worker's Abort decided first."""
    attempt: FlipAttempt | None = None
    reports: list[Report] = []
    while True:
        for msg in reader.poll(0.05):
            gate.apply(msg)
            if isinstance(msg, Report) and msg.epoch == prepare.epoch:
                reports.append(msg)
                if attempt is None and msg.sources:
                    attempt = FlipAttempt(prepare, _partitions(bootstrap, set(msg.sources), extra), state)
                    for r in reports[:-1]:
                        attempt.on_report(r)
                if attempt is not None:
                    attempt.on_report(msg)
        if prepare.epoch in gate.decided:
            return None  # a worker gave up waiting and wrote an Abort: that is the decision
        elapsed = (time.monotonic() - started) * 1000
        if attempt is not None:
            decision = attempt.decision(elapsed)
            if decision is not None:
                return decision
        elif elapsed > prepare.timeout_ms:
            return Abort(prepare.epoch, "no worker reported a position before the deadline")


def _first_decision(reader: ControlReader, gate: Gate, epoch: int) -> Commit | Abort:
    """Read until the control topic holds a decision for ``epoch``; return the first one."""
    until = time.monotonic() + DECISION_READ_TIMEOUT_S
    while epoch not in gate.decided:
        if time.monotonic() > until:
            raise TimeoutError(f"the decision of flip {epoch} was written but not read back")
        for msg in reader.poll(0.05):
            gate.apply(msg)
    return gate.decided[epoch]


def _await_drain(reader: ControlReader, gate: Gate, timeout_s: float) -> tuple[float, list[TopicPartition]]:
    """Milliseconds until the old active drained, and the partitions still not drained."""
    started = time.monotonic()
    while gate.undrained() and time.monotonic() - started <= timeout_s:
        for msg in reader.poll(0.1):
            gate.apply(msg)
    return (time.monotonic() - started) * 1000, gate.undrained()
