"""A worker's part in blue-green deploys: the sink gate and the flip protocol's worker side.

Installed when the worker runs with a color (``BATON_COLOR``). The runtime calls it from
its one processing thread only, so the gate needs no locks:

* :meth:`BlueGreen.allows` is the sink gate (``SinkGate``): only the color that owns an
  input offset, per the control topic's cut, emits its outputs. Changelogs are never gated,
  so the silent color's state stays hot.
* :meth:`BlueGreen.poll` folds new control records into the gate.
* On a ``prepare`` the runtime commits, pauses every input partition, and calls
  :meth:`BlueGreen.report` with its positions; it resumes when the flip is committed or
  aborted (or the prepare's deadline passed with neither).
* :meth:`BlueGreen.drains_due` gives the ``drained`` records the old active must write in
  the transaction that carries its last output below a pending cut.

The protocol and its reasoning live in :mod:`baton.control`.
"""

from __future__ import annotations

import logging
import time

from confluent_kafka import Producer

from baton.control.channel import ControlReader, ensure_control_topic
from baton.control.gate import Gate
from baton.control.messages import Color, Drained, Prepare, Report, TopicPartition

log = logging.getLogger("baton.worker.runtime.bluegreen")


class BlueGreen:
    def __init__(
        self,
        bootstrap: str,
        control_topic: str,
        color: Color,
        member: str,
        client_config: dict[str, str] | None = None,
    ) -> None:
        self.topic = control_topic
        self.color = color
        self.member = member
        self.gate = Gate(color)
        self._bootstrap = bootstrap
        self._extra = dict(client_config or {})
        self._reader: ControlReader | None = None
        self._producer: Producer | None = None
        self._drains_written: set[tuple[int, TopicPartition]] = set()
        self._gave_up: set[int] = set()  # epochs this worker wrote an Abort for

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> None:
        """Create the control topic if needed and read it to its end before processing starts."""
        ensure_control_topic(self._bootstrap, self.topic, self._extra)
        self._reader = ControlReader(self._bootstrap, self.topic, self._extra)
        for msg in self._reader.read_to_end(timeout=60):
            self.gate.apply(msg)
        self._producer = Producer(
            {"bootstrap.servers": self._bootstrap, "enable.idempotence": True, "linger.ms": 0, **self._extra}
        )
        state = self.gate.state
        log.info(
            "blue-green gate ready",
            extra={
                "color": self.color,
                "active": state.active,
                "epoch": state.epoch,
                "control_topic": self.topic,
            },
        )

    def close(self) -> None:
        if self._reader is not None:
            self._reader.close()
        if self._producer is not None:
            self._producer.flush(5)

    # -- the gate ----------------------------------------------------------------------------
    def allows(self, topic: str, partition: int, offset: int) -> bool:
        return self.gate.emits((topic, partition), offset)

    def wait(self, timeout: float) -> None:
        """Block up to ``timeout`` for control records (used while paused for a flip)."""
        self.poll(timeout)

    def catch_up(self) -> None:
        """Fold every control record written so far (before processing newly assigned partitions)."""
        assert self._reader is not None
        before = self.gate.state.epoch
        for msg in self._reader.catch_up():
            self.gate.apply(msg)
        self._log_commit(before)

    def poll(self, timeout: float = 0) -> None:
        assert self._reader is not None
        before = self.gate.state.epoch
        for msg in self._reader.poll(timeout):
            self.gate.apply(msg)
        self._log_commit(before)

    def _log_commit(self, before: int) -> None:
        if self.gate.state.epoch != before:
            state = self.gate.state
            log.info(
                "flip committed",
                extra={
                    "epoch": state.epoch,
                    "active": state.active,
                    "color": self.color,
                    "pending": len(state.pending),
                },
            )

    def holding(self) -> bool:
        """Whether any partition may have to wait for the old active's drain (cheap pre-check)."""
        state = self.gate.state
        return bool(state.pending) and state.active == self.color

    def held(self, tp: TopicPartition, offset: int) -> bool:
        return self.gate.held(tp, offset)

    def still_held(self, tp: TopicPartition) -> bool:
        return self.gate.held(tp, self.gate.state.cut.get(tp, 0))

    # -- the flip --------------------------------------------------------------------------
    def pending_prepare(self) -> Prepare | None:
        return self.gate.pending_prepare()

    def report(
        self,
        epoch: int,
        positions: dict[TopicPartition, int],
        sources: list[str],
        refusal: str,
        generation: int,
    ) -> None:
        """Write this member's positions; non-transactional, since the data behind them is committed."""
        assert self._producer is not None
        refusal = refusal or self.gate.refusal()
        rep = Report(epoch, self.color, self.member, positions, tuple(sorted(sources)), refusal, generation)
        self._producer.produce(self.topic, rep.encode(), rep.key(), partition=0)
        remaining = self._producer.flush(10)
        if remaining:
            log.warning("flip report not delivered", extra={"epoch": epoch})
        log.info(
            "flip prepared: paused and reported",
            extra={
                "epoch": epoch,
                "color": self.color,
                "partitions": len(positions),
                "generation": generation,
                "refusal": refusal or None,
            },
        )

    def give_up(self, waited_s: float) -> bool:
        """Abort the flip this worker paused for if no decision came in time; True if it wrote one.

        The Abort decides only if it lands before the coordinator's Commit; either way every
        reader, this one included, follows whichever of the two the control topic holds first.
        """
        abort = self.gate.give_up(self.member, waited_s * 1000)
        if abort is None or abort.epoch in self._gave_up:
            return False
        self._gave_up.add(abort.epoch)
        assert self._producer is not None
        self._producer.produce(self.topic, abort.encode(), abort.key(), partition=0)
        self._producer.flush(10)
        log.warning(
            "flip given up", extra={"epoch": abort.epoch, "color": self.color, "reason": abort.reason}
        )
        return True

    def drains_due(self, positions: dict[TopicPartition, int]) -> list[tuple[bytes, bytes]]:
        """``drained`` records due once ``positions`` (about to be committed) are committed."""
        out = []
        for tp, pos in positions.items():
            if (
                self.gate.must_confirm_drain(tp, pos)
                and (self.gate.state.epoch, tp) not in self._drains_written
            ):
                msg = Drained(self.gate.state.epoch, tp)
                out.append((msg.key(), msg.encode()))
        return out

    def drains_committed(self, records: list[tuple[bytes, bytes]]) -> None:
        for key, _value in records:
            _kind, epoch, tp = key.decode().split("/", 2)
            topic, _, part = tp.rpartition(":")
            self._drains_written.add((int(epoch), (topic, int(part))))
            log.info(
                "drained below the cut", extra={"epoch": int(epoch), "topic": topic, "partition": int(part)}
            )

    def write_now(self, records: list[tuple[bytes, bytes]]) -> None:
        """At-least-once: write ``drained`` records after the outputs were flushed and committed."""
        assert self._producer is not None
        for key, value in records:
            self._producer.produce(self.topic, value, key, partition=0, timestamp=int(time.time() * 1000))
        self._producer.flush(10)
