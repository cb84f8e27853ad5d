"""The worker's view of the control topic: may this color emit this record, now?

A :class:`Gate` folds control records in topic order. It answers, without I/O:

* :meth:`Gate.emits` — the sink rule. ``state.active`` emits input offsets at or above
  ``state.cut[tp]``; the other color emits only what it still owed at the flip, offsets in
  ``[state.floor[tp], state.cut[tp])`` of a pending partition, until its Drained record is
  out. With no cut for ``tp`` the active color emits everything. Both colors compute the
  same outputs for the same input records (deterministic topology), so splitting the input
  offsets between them yields every output exactly once.
* :meth:`Gate.pending_prepare` — a flip is being prepared: commit, pause, report.
* :meth:`Gate.held` — the new active must not emit for ``tp`` yet, because the old active
  has not confirmed that its outputs below the cut are committed. Without this wait a
  downstream table could see a newer count and then an older one.
* :meth:`Gate.refusal` — why this worker must refuse a prepare (a previous flip still drains).

Decisions are ordered by the control topic alone: the first Commit or Abort of an epoch is
the decision, for every reader; later ones are ignored. No wall clock takes part, so a
worker that gives up waiting (it writes an Abort) and a coordinator that commits late can
never act on different outcomes.
"""

from __future__ import annotations

from .messages import (
    Abort,
    ActiveState,
    Color,
    Commit,
    Drained,
    Draining,
    Message,
    Prepare,
    Report,
    TopicPartition,
    other,
    tp_str,
)

# A worker paused for a flip gives up (writes an Abort) this long after the prepare's own
# timeout if it has read neither commit nor abort: the coordinator died or cannot write.
RESUME_GRACE_MS = 10_000


class Gate:
    """Emission state of one worker of one color."""

    def __init__(self, color: Color, initial_active: Color = "blue") -> None:
        self.color = color
        self.state = ActiveState(epoch=0, active=initial_active)
        self.drained: set[tuple[int, TopicPartition]] = set()
        self.decided: dict[int, Commit | Abort] = {}  # the first decision record of each epoch
        self.top_epoch = 0  # the highest epoch ever used (prepared, decided)
        self._prepare: Prepare | None = None
        self.draining: frozenset[str] = frozenset()  # this color's Pods about to go (scale-in)

    # -- folding control records -------------------------------------------------------
    def apply(self, msg: Message) -> None:
        if isinstance(msg, Draining):
            if msg.color == self.color:
                self.draining = msg.pods
            return
        if isinstance(msg, ActiveState):
            # written with its Commit; a state of an epoch whose first decision was an abort
            # is not in force
            if msg.epoch >= self.state.epoch and not isinstance(self.decided.get(msg.epoch), Abort):
                self.state = msg
                self.decided.setdefault(msg.epoch, Commit(msg))
        elif isinstance(msg, Commit):
            if msg.state.epoch not in self.decided:
                self.decided[msg.state.epoch] = msg
                if msg.state.epoch >= self.state.epoch:
                    self.state = msg.state
        elif isinstance(msg, Abort):
            self.decided.setdefault(msg.epoch, msg)
        elif isinstance(msg, Prepare):
            if msg.epoch > self.state.epoch and (self._prepare is None or msg.epoch > self._prepare.epoch):
                self._prepare = msg
        elif isinstance(msg, Drained):
            self.drained.add((msg.epoch, msg.tp))
        elif isinstance(msg, Report):
            pass  # for the coordinator
        epoch = msg.state.epoch if isinstance(msg, Commit) else msg.epoch
        self.top_epoch = max(self.top_epoch, epoch)
        if self._prepare is not None and (
            self._prepare.epoch in self.decided or self._prepare.epoch <= self.state.epoch
        ):
            self._prepare = None

    # -- questions -----------------------------------------------------------------------
    @property
    def is_active(self) -> bool:
        """Whether this color is the active one (for input beyond every cut)."""
        return self.state.active == self.color

    def emits(self, tp: TopicPartition, offset: int) -> bool:
        state = self.state
        cut = state.cut.get(tp)
        if cut is None:
            return self.is_active
        if self.is_active:
            return offset >= cut
        return (
            tp in state.pending
            and (state.epoch, tp) not in self.drained
            and state.floor.get(tp, 0) <= offset < cut
        )

    def undrained(self) -> list[TopicPartition]:
        """Pending partitions of the state in force whose Drained record is not out yet."""
        return sorted(tp for tp in self.state.pending if (self.state.epoch, tp) not in self.drained)

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

    def pending_prepare(self) -> Prepare | None:
        """The flip to pause for: prepared and not decided yet."""
        return self._prepare

    def refusal(self) -> str:
        """Why a prepare must be refused now: the flip in force still drains below its cut.

        A new cut would drop the old active's unfinished range, and those records would be
        emitted by neither color. The coordinator checks the same before it prepares; this
        catches a second coordinator that did not.
        """
        waiting = self.undrained()
        if not waiting:
            return ""
        return (
            f"flip {self.state.epoch} is still draining: {other(self.state.active)} has not emitted "
            f"everything below the cut of {', '.join(tp_str(tp) for tp in waiting)}"
        )

    def give_up(self, member: str, waited_ms: float) -> Abort | None:
        """The Abort a worker writes when the prepare it paused for stayed undecided too long."""
        prepare = self._prepare
        if prepare is None or waited_ms < prepare.timeout_ms + RESUME_GRACE_MS:
            return None
        return Abort(
            prepare.epoch,
            f"{self.color} worker {member} heard no decision within {waited_ms / 1000:.0f}s of the prepare",
        )
