"""The flip coordinator's decisions, as a pure state machine.

One :class:`FlipAttempt` per epoch. It is fed the reports that arrive on the control
topic and asked, at any time, for its decision:

* every input partition reported by both colors → :class:`Commit` with the cut
  ``C[tp] = max(blue[tp], green[tp])``; the partitions where the old active is below the
  cut are marked pending (with the old active's position as the floor of what it still
  owes), so the new active waits for the old one's Drained record;
* the timeout passed first → :class:`Abort`; the old active stays active.

Reports name the consumer group generation they speak for. A rebalance in the middle of a
flip moves partitions between members; only the newest generation's reports of a color are
combined, and the attempt waits until they cover every partition again, so a position
reported by a member that no longer owns the partition never sets the cut.

The timeout is only about liveness. Whether the flip happened is whatever the control
topic holds first for the epoch, a Commit or some party's Abort (see
:mod:`baton.control.gate`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Abort, ActiveState, Color, Commit, Prepare, Report, TopicPartition, other, tp_str


def prepare_refusal(state: ActiveState, drained: set[tuple[int, TopicPartition]]) -> str:
    """Why no flip may be prepared now: the one in force has not drained below its cut.

    Preparing anyway would replace the cut and the pending set, and the old active's
    unfinished range would be emitted by neither color (the model check found exactly this).
    """
    waiting = sorted(tp for tp in state.pending if (state.epoch, tp) not in drained)
    if not waiting:
        return ""
    return (
        f"flip {state.epoch} to {state.active} is still draining: {other(state.active)} has not yet "
        f"emitted everything below the cut of {', '.join(tp_str(tp) for tp in waiting)}; "
        "flip again once it has (it needs its workers running)"
    )


def compute_cut(
    blue: dict[TopicPartition, int], green: dict[TopicPartition, int]
) -> dict[TopicPartition, int]:
    """The per-partition cut: the further of the two colors' positions."""
    return {tp: max(blue[tp], green[tp]) for tp in blue.keys() & green.keys()}


@dataclass
class FlipAttempt:
    """State of flip ``prepare.epoch`` towards ``prepare.to`` over ``partitions``."""

    prepare: Prepare
    partitions: frozenset[TopicPartition]
    previous: ActiveState
    positions: dict[Color, dict[TopicPartition, int]] = field(
        default_factory=lambda: {"blue": {}, "green": {}}
    )
    generation: dict[Color, int] = field(default_factory=lambda: {"blue": -1, "green": -1})
    refusal: str = ""

    def on_report(self, report: Report) -> None:
        if report.epoch != self.prepare.epoch:
            return
        if report.refusal and not self.refusal:
            self.refusal = f"{report.color} worker {report.member} refuses the flip: {report.refusal}"
        color = report.color
        if report.generation < self.generation[color]:
            return  # speaks for an assignment the group has left behind
        if report.generation > self.generation[color]:
            self.generation[color] = report.generation
            self.positions[color] = {}  # every member re-reports for its new assignment
        mine = self.positions[color]
        for tp, pos in report.positions.items():
            # within one generation a partition can be reported twice (revoked, then assigned
            # again); the later report starts from the committed offset, never below the earlier
            mine[tp] = max(pos, mine.get(tp, pos))

    def missing(self) -> dict[Color, list[TopicPartition]]:
        return {c: sorted(self.partitions - self.positions[c].keys()) for c in ("blue", "green")}

    def decision(self, elapsed_ms: float) -> Commit | Abort | None:
        """What to write now, ``elapsed_ms`` after the prepare (on the coordinator's own clock)."""
        if self.refusal:
            return Abort(self.prepare.epoch, self.refusal)
        missing = self.missing()
        if not missing["blue"] and not missing["green"]:
            return Commit(self.new_state())
        if elapsed_ms > self.prepare.timeout_ms:
            parts = [f"{c}: {', '.join(f'{t}:{p}' for t, p in tps)}" for c, tps in missing.items() if tps]
            return Abort(self.prepare.epoch, f"no position before the deadline for {'; '.join(parts)}")
        return None

    def new_state(self) -> ActiveState:
        to = self.prepare.to
        old = other(to)
        blue = {tp: p for tp, p in self.positions["blue"].items() if tp in self.partitions}
        green = {tp: p for tp, p in self.positions["green"].items() if tp in self.partitions}
        # never below the previous cut: everything under it is out already (a rebuilt color
        # that reports an earlier position must not emit it again as the new active)
        cut = {tp: max(c, self.previous.cut.get(tp, 0)) for tp, c in compute_cut(blue, green).items()}
        old_pos = blue if old == "blue" else green
        # What the old active still owes: from where it stands, but never below the cut of the
        # flip that made it active (it was silent below that cut, and the other color emitted
        # those offsets: the previous flip drained before this one was prepared).
        start = {tp: max(old_pos[tp], self.previous.cut.get(tp, 0)) for tp in cut}
        pending = frozenset(tp for tp, c in cut.items() if start[tp] < c)
        floor = {tp: start[tp] for tp in pending}
        return ActiveState(epoch=self.prepare.epoch, active=to, cut=cut, pending=pending, floor=floor)
