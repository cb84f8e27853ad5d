"""The worker's view of the control topic: may this color emit this record, now?

A :class:`Gate` folds control records in topic order. It answers three questions for the
worker, none of which needs I/O:

* :meth:`Gate.emits` — the sink rule. ``state.active`` emits input offsets at or above
  ``state.cut[tp]``, the other color emits those below it; with no cut for ``tp`` the
  active color emits everything. Both colors compute the same outputs for the same input
  records (deterministic topology), so splitting the input offsets between them by one
  cut yields every output exactly once.
* :meth:`Gate.pending_prepare` — a flip is being prepared: commit, pause, report.
* :meth:`Gate.held` — the new active must not emit for ``tp`` yet, because the old active
  has not confirmed that its outputs below the cut are committed. Without this wait a
  downstream table could see a newer count and then an older one.
"""

from __future__ import annotations

import time

from .messages import (
    Abort,
    ActiveState,
    Color,
    Commit,
    Drained,
    Message,
    Prepare,
    Report,
    TopicPartition,
    other,
)

# A worker paused for a flip resumes on its own this long after the coordinator's deadline
# if it has heard neither commit nor abort (the coordinator died). The coordinator never
# commits after its deadline, so the grace only has to cover control-topic delivery.
RESUME_GRACE_MS = 10_000


class Gate:
    """Emission state of one worker of one color."""

    def __init__(self, color: Color, initial_active: Color = "blue") -> None:
        self.color = color
        self.state = ActiveState(epoch=0, active=initial_active)
        self.drained: set[tuple[int, TopicPartition]] = set()
        self._prepare: Prepare | None = None
        self._closed_epochs: set[int] = set()  # committed or aborted

    # -- folding control records -------------------------------------------------------
    def apply(self, msg: Message) -> None:
        if isinstance(msg, ActiveState):
            if msg.epoch >= self.state.epoch:
                self.state = msg
                self._closed_epochs.add(msg.epoch)
        elif isinstance(msg, Commit):
            if msg.state.epoch >= self.state.epoch:
                self.state = msg.state
            self._closed_epochs.add(msg.state.epoch)
        elif isinstance(msg, Abort):
            self._closed_epochs.add(msg.epoch)
        elif isinstance(msg, Prepare):
            if msg.epoch > self.state.epoch and (self._prepare is None or msg.epoch > self._prepare.epoch):
                self._prepare = msg
        elif isinstance(msg, Drained):
            self.drained.add((msg.epoch, msg.tp))
        elif isinstance(msg, Report):
            pass  # for the coordinator
        if self._prepare is not None and self._prepare.epoch in self._closed_epochs:
            self._prepare = None

    # -- questions -----------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        """Whether this color is the active one (for input beyond every cut)."""
        return self.state.active == self.color

    def emits(self, tp: TopicPartition, offset: int) -> bool:
        cut = self.state.cut.get(tp)
        if cut is None:
            return self.is_active
        return self.is_active == (offset >= cut)

    def held(self, tp: TopicPartition, offset: int) -> bool:
        """True while the new active must wait before emitting ``offset`` of ``tp``."""
        return (
            self.is_active
            and tp in self.state.pending
            and offset >= self.state.cut.get(tp, 0)
            and (self.state.epoch, tp) not in self.drained
        )

    def must_confirm_drain(self, tp: TopicPartition, committed_position: int) -> bool:
        """Old active: write Drained for ``tp`` in the transaction that reaches the cut."""
        return (
            self.state.active == other(self.color)
            and tp in self.state.pending
            and (self.state.epoch, tp) not in self.drained
            and committed_position >= self.state.cut.get(tp, 0)
        )

    def pending_prepare(self, now_ms: int | None = None) -> Prepare | None:
        """The flip to pause for, unless it was decided or its deadline (plus grace) passed."""
        if self._prepare is None:
            return None
        now = int(time.time() * 1000) if now_ms is None else now_ms
        if now > self._prepare.deadline_ms + RESUME_GRACE_MS:
            return None
        return self._prepare
