"""Records of the control topic.

The control topic is compacted and has one partition, so its record keys are chosen for
what must survive compaction: the ``state`` record (who is active, and from which input
offsets) lives forever under one key; the messages of one flip carry the epoch in the key
and are superseded by the next flip's.

Input partitions are written ``"topic:partition"`` in JSON because JSON objects need
string keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

import orjson

Color = Literal["blue", "green"]
COLORS: tuple[Color, Color] = ("blue", "green")
TopicPartition = tuple[str, int]

STATE_KEY = b"state"


def other(color: Color) -> Color:
    return "green" if color == "blue" else "blue"


def tp_str(tp: TopicPartition) -> str:
    return f"{tp[0]}:{tp[1]}"


def tp_parse(text: str) -> TopicPartition:
    topic, _, part = text.rpartition(":")
    return topic, int(part)


def _offsets_json(offsets: dict[TopicPartition, int]) -> dict[str, int]:
    return {tp_str(tp): off for tp, off in sorted(offsets.items())}


def _offsets_parse(raw: dict[str, int]) -> dict[TopicPartition, int]:
    return {tp_parse(k): int(v) for k, v in raw.items()}


@dataclass(frozen=True)
class ActiveState:
    """Who emits: ``active`` from ``cut[tp]`` on, ``other(active)`` below it.

    With no flip ever done the cut is empty: the active color emits everything. After the
    flip of epoch e the cut stays in force, which is exactly right for the records of the
    old active that are still below it.
    """

    epoch: int
    active: Color
    cut: dict[TopicPartition, int] = field(default_factory=dict)
    # partitions where the old active was behind the cut at the flip: the new active holds
    # them until the old active's Drained record says everything below the cut is out
    pending: frozenset[TopicPartition] = frozenset()

    def to_json(self) -> dict[str, object]:
        return {
            "epoch": self.epoch,
            "active": self.active,
            "cut": _offsets_json(self.cut),
            "pending": sorted(tp_str(tp) for tp in self.pending),
        }

    def encode(self) -> bytes:
        return orjson.dumps({"type": "state", **self.to_json()})


@dataclass(frozen=True)
class Prepare:
    """Coordinator → workers: commit, pause, and report positions for flip ``epoch``."""

    epoch: int
    to: Color
    deadline_ms: int  # wall clock (ms since epoch) after which the coordinator aborts

    def key(self) -> bytes:
        return f"prepare/{self.epoch}".encode()

    def encode(self) -> bytes:
        return orjson.dumps(
            {"type": "prepare", "epoch": self.epoch, "to": self.to, "deadline_ms": self.deadline_ms}
        )


@dataclass(frozen=True)
class Report:
    """Worker → coordinator: the next input offset it will process, per assigned input partition."""

    epoch: int
    color: Color
    member: str
    positions: dict[TopicPartition, int]
    # the topology's external source topics, so the coordinator knows every partition to wait for
    sources: tuple[str, ...] = ()
    # non-empty when this worker cannot take part in an exact flip (the coordinator aborts with it)
    refusal: str = ""

    def key(self) -> bytes:
        return f"report/{self.epoch}/{self.color}/{self.member}".encode()

    def encode(self) -> bytes:
        return orjson.dumps(
            {
                "type": "report",
                "epoch": self.epoch,
                "color": self.color,
                "member": self.member,
                "positions": _offsets_json(self.positions),
                "sources": list(self.sources),
                "refusal": self.refusal,
            }
        )


@dataclass(frozen=True)
class Commit:
    """Coordinator → workers: the flip is decided; ``state`` is the new emission rule."""

    state: ActiveState

    def key(self) -> bytes:
        return f"commit/{self.state.epoch}".encode()

    def encode(self) -> bytes:
        return orjson.dumps({"type": "commit", **self.state.to_json()})


@dataclass(frozen=True)
class Abort:
    """Coordinator → workers: flip ``epoch`` is off; resume under the old state."""

    epoch: int
    reason: str

    def key(self) -> bytes:
        return f"abort/{self.epoch}".encode()

    def encode(self) -> bytes:
        return orjson.dumps({"type": "abort", "epoch": self.epoch, "reason": self.reason})


@dataclass(frozen=True)
class Drained:
    """Old active → new active: everything below the cut of ``tp`` is emitted and committed.

    Written in the same transaction as the old active's last output below the cut, so a
    read_committed reader sees it only once that output is visible.
    """

    epoch: int
    tp: TopicPartition

    def key(self) -> bytes:
        return f"drained/{self.epoch}/{tp_str(self.tp)}".encode()

    def encode(self) -> bytes:
        return orjson.dumps({"type": "drained", "epoch": self.epoch, "tp": tp_str(self.tp)})


Message = ActiveState | Prepare | Report | Commit | Abort | Drained


class BadControlRecord(ValueError):
    """A control record that does not parse; the channel logs and skips it."""


def _state(raw: dict[str, object]) -> ActiveState:
    active = raw["active"]
    if active not in COLORS:
        raise ValueError(f"active must be blue or green, not {active!r}")
    cut = raw["cut"]
    pending = raw.get("pending", [])
    assert isinstance(cut, dict) and isinstance(pending, list) and isinstance(raw["epoch"], int)
    return ActiveState(raw["epoch"], active, _offsets_parse(cut), frozenset(tp_parse(t) for t in pending))


def decode(value: bytes) -> Message:
    try:
        raw = orjson.loads(value)
        kind = raw["type"]
        if kind == "state":
            return _state(raw)
        if kind == "prepare":
            return Prepare(raw["epoch"], raw["to"], raw["deadline_ms"])
        if kind == "report":
            return Report(
                raw["epoch"],
                raw["color"],
                raw["member"],
                _offsets_parse(raw["positions"]),
                tuple(raw.get("sources", ())),
                raw.get("refusal", ""),
            )
        if kind == "commit":
            return Commit(_state(raw))
        if kind == "abort":
            return Abort(raw["epoch"], raw["reason"])
        if kind == "drained":
            return Drained(raw["epoch"], tp_parse(raw["tp"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AssertionError) as exc:
        raise BadControlRecord(f"unreadable control record: {exc}") from exc
    raise BadControlRecord(f"unknown control record type {kind!r}")
