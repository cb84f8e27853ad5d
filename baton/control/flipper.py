"""The flip coordinator's decisions, as a pure state machine.

One :class:`FlipAttempt` per epoch. It is fed the reports that arrive on the control
topic and asked, at any time, for its decision:

* every input partition reported by both colors → :class:`Commit` with the cut
  ``C[tp] = max(blue[tp], green[tp])``; the partitions where the old active is below the
  cut are marked pending, so the new active waits for the old one's Drained record;
* the deadline passed first → :class:`Abort`; the old active stays active.

The coordinator never commits after the deadline: workers resume on their own shortly
after it (see :data:`baton.control.gate.RESUME_GRACE_MS`), and a late commit would let
both colors emit the same offsets.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .messages import Abort, ActiveState, Color, Commit, Prepare, Report, TopicPartition, other


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
    refusal: str = ""

    def on_report(self, report: Report) -> None:
        if report.epoch != self.prepare.epoch:
            return
        if report.refusal and not self.refusal:
            self.refusal = f"{report.color} worker {report.member} refuses the flip: {report.refusal}"
        mine = self.positions[report.color]
        for tp, pos in report.positions.items():
            # a partition that moved between members mid-flip is reported twice; the later
            # owner starts from the committed offset, which is never below the earlier report
            mine[tp] = max(pos, mine.get(tp, pos))

    def missing(self) -> dict[Color, list[TopicPartition]]:
        return {c: sorted(self.partitions - self.positions[c].keys()) for c in ("blue", "green")}

    def decision(self, now_ms: int) -> Commit | Abort | None:
        if self.refusal:
            return Abort(self.prepare.epoch, self.refusal)
        missing = self.missing()
        if not missing["blue"] and not missing["green"]:
            if now_ms > self.prepare.deadline_ms:
                return Abort(self.prepare.epoch, "all positions arrived, but after the deadline")
            return Commit(self.new_state())
        if now_ms > self.prepare.deadline_ms:
            parts = [f"{c}: {', '.join(f'{t}:{p}' for t, p in tps)}" for c, tps in missing.items() if tps]
            return Abort(self.prepare.epoch, f"no position before the deadline for {'; '.join(parts)}")
        return None

    def new_state(self) -> ActiveState:
        to = self.prepare.to
        old = other(to)
        blue = {tp: p for tp, p in self.positions["blue"].items() if tp in self.partitions}
        green = {tp: p for tp, p in self.positions["green"].items() if tp in self.partitions}
        cut = compute_cut(blue, green)
        old_pos = blue if old == "blue" else green
        pending = frozenset(tp for tp, c in cut.items() if old_pos[tp] < c)
        return ActiveState(epoch=self.prepare.epoch, active=to, cut=cut, pending=pending)
