"""The processing loop's part in a flip: pause and report on a prepare, hold new actives at the cut.

``bluegreen.py`` follows the control topic and gates the sinks; this is what the loop does
about it between two batches. On a ``prepare`` the worker commits what it processed, stops
consuming (not ``consumer.pause()``: librdkafka drops its prefetched records on pause and
refetches only ~0.5-0.7 s after resume, which would add that to every flip) and reports its
committed positions; it resumes when the flip is decided. A new active that reaches a
pending cut before the old active drained waits there, paused at the cut's offset.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from confluent_kafka import Consumer, TopicPartition

from baton.worker.naming import TaskId
from baton.worker.runtime.bluegreen import BlueGreen
from baton.worker.runtime.task import Task

log = logging.getLogger("baton.worker")


class FlipPause:
    def __init__(  # noqa: PLR0917 (one collaborator each)
        self,
        bluegreen: BlueGreen,
        consumer: Consumer,
        commit: Callable[[], None],
        tasks: Mapping[TaskId, Task],
        sources: list[str],
        refusal: str,
        held: set[tuple[str, int]],
    ) -> None:
        self.bg = bluegreen
        self._consumer = consumer
        self._commit = commit
        self._tasks = tasks
        self._sources = sources  # offsets that mean the same in both colors (no repartition topics)
        self._refusal = refusal
        self.held = held  # the worker's: a task activated later is paused if its partition is held
        self.paused = False
        self._reported: tuple[int, int] | None = None  # (epoch, assignment version) last reported
        self._paused_at: tuple[int, float] | None = None  # (epoch, monotonic time) of the pause

    def step(self, assignment_version: int, generation: int) -> None:
        """Follow the control topic: pause and report on a prepare, resume when it is decided."""
        bg = self.bg
        bg.poll()
        prepare = bg.pending_prepare()
        if prepare is None:
            if self.paused:
                self.paused = False
                self._paused_at = None
                log.info(
                    "flip over, resumed", extra={"epoch": bg.gate.state.epoch, "active": bg.gate.state.active}
                )
            return
        if self._reported == (prepare.epoch, assignment_version):
            # no decision yet: after the prepare's timeout (this process's clock) give up with an
            # Abort; whichever of it and the coordinator's Commit is first in the topic decides
            if self._paused_at is not None:
                bg.give_up(time.monotonic() - self._paused_at[1])
            return
        # Commit what was processed, so the reported positions are committed positions.
        # Heartbeats go on in librdkafka's own thread; the pause is far below max.poll.interval.ms.
        self._commit()
        self.paused = True
        if self._paused_at is None or self._paused_at[0] != prepare.epoch:
            self._paused_at = (prepare.epoch, time.monotonic())
        positions: dict[tuple[str, int], int] = {}
        for task in self._tasks.values():
            for topic in self._sources:
                if topic in task.positions:
                    positions[(topic, task.partition)] = self._real_offset(
                        topic, task.partition, task.positions[topic]
                    )
        bg.report(prepare.epoch, positions, self._sources, self._refusal, generation)
        self._reported = (prepare.epoch, assignment_version)

    def _real_offset(self, topic: str, partition: int, position: int) -> int:
        """A logical start offset (no commit yet: 'beginning') as the partition's first offset."""
        if position >= 0:
            return position
        low, _high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(low)

    def hold(self, topic: str, partition: int, offset: int) -> None:
        """New active reached a pending cut first: wait there until the old active has drained."""
        tp = TopicPartition(topic, partition, offset)
        self._consumer.pause([tp])
        self._consumer.seek(tp)
        self.held.add((topic, partition))
        log.info(
            "holding at the cut until the old active drains",
            extra={"topic": topic, "partition": partition, "offset": offset},
        )

    def release_held(self, active: Mapping[tuple[str | None, int | None], Task]) -> None:
        for tp in [tp for tp in self.held if not self.bg.still_held(tp)]:
            self.held.discard(tp)
            if tp in active:
                self._consumer.resume([TopicPartition(*tp)])
            log.info("old active drained, emitting", extra={"topic": tp[0], "partition": tp[1]})
