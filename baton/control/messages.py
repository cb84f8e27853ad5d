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
    """Who emits: ``active`` from ``cut[tp]`` on; ``other(active)`` only ``[floor[tp], cut[tp])``.

    With no flip ever done the cut is empty: the active color emits everything. After the
    flip of epoch e the old active still owes the offsets between its reported position
    (``floor``) and the cut on the ``pending`` partitions, and nothing else: everything below
    ``floor`` was emitted before the flip. Bounding the range below is what keeps a rebuilt
    idle color (empty state, input from the earliest offset) from emitting history again.
    """

    epoch: int
    active: Color
    cut: dict[TopicPartition, int] = field(default_factory=dict)
    # partitions where the old active was behind the cut at the flip: the new active holds
    # them until the old active's Drained record says everything below the cut is out
    pending: frozenset[TopicPartition] = frozenset()
    # per pending partition, the old active's reported position: where its range starts
    floor: dict[TopicPartition, int] = field(default_factory=dict)

    def to_json(self) -> dict[str, object]:
        return {
            "epoch": self.epoch,
            "active": self.active,
            "cut": _offsets_json(self.cut),
            "pending": sorted(tp_str(tp) for tp in self.pending),
            "floor": _offsets_json(self.floor),
        }

    def encode(self) -> bytes:
        return orjson.dumps({"type": "state", **self.to_json()})


@dataclass(frozen=True)
class Prepare:
    """Coordinator → workers: commit, pause, and report positions for flip ``epoch``.

    ``timeout_ms`` is a duration, not a wall-clock deadline: each party measures it on its
    own monotonic clock from when it saw the prepare, and gives up by writing an
    :class:`Abort`. Who decided is then whatever decision the control topic holds first
    for the epoch, so no clock, skewed or slow, can make two parties act on different
    decisions.
    """

    epoch: int
    to: Color
    timeout_ms: int

    def key(self) -> bytes:
        return f"prepare/{self.epoch}".encode()

    def encode(self) -> bytes:
        return orjson.dumps(
            {"type": "prepare", "epoch": self.epoch, "to": self.to, "timeout_ms": self.timeout_ms}
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
    # the consumer group generation whose assignment ``positions`` cover: the coordinator
    # combines only the newest generation's reports of each color
    generation: int = -1

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
                "generation": self.generation,
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
    """Coordinator or a worker that gave up waiting → everyone: flip ``epoch`` is off.

    The first of Commit and Abort for an epoch in the control topic is the decision; a
    later one is ignored by every reader, the coordinator included.
    """

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


@dataclass(frozen=True)
class Draining:
    """Operator → one color's workers: the Pods (``host``) about to go in a scale-in.

    A worker whose Pod is named reports ``draining`` when it joins the group, and the
    assignor gives it no active task, so its tasks move to members that hold them (standbys,
    or warmups first) while it keeps running; the operator removes the Pods once they own
    none. One record per color under one key: the latest is the whole set (empty: none).
    """

    color: Color
    pods: frozenset[str] = frozenset()

    def key(self) -> bytes:
        return f"draining/{self.color}".encode()

    def encode(self) -> bytes:
        return orjson.dumps({"type": "draining", "color": self.color, "pods": sorted(self.pods)})


Message = ActiveState | Prepare | Report | Commit | Abort | Drained | Draining


class BadControlRecord(ValueError):
    """A control record that does not parse; the channel logs and skips it."""


def _state(raw: dict[str, object]) -> ActiveState:
    active = raw["active"]
    if active not in COLORS:
        raise ValueError(f"active must be blue or green, not {active!r}")
    cut = raw["cut"]
    pending = raw.get("pending", [])
    assert isinstance(cut, dict) and isinstance(pending, list) and isinstance(raw["epoch"], int)
    floor = raw.get("floor", {})
    assert isinstance(floor, dict)
    return ActiveState(
        raw["epoch"],
        active,
        _offsets_parse(cut),
        frozenset(tp_parse(t) for t in pending),
        _offsets_parse(floor),
    )


def decode(value: bytes) -> Message:
    try:
        raw = orjson.loads(value)
        kind = raw["type"]
        if kind == "state":
            return _state(raw)
        if kind == "prepare":
            return Prepare(raw["epoch"], raw["to"], int(raw.get("timeout_ms", 10_000)))
        if kind == "report":
            return Report(
                raw["epoch"],
                raw["color"],
                raw["member"],
                _offsets_parse(raw["positions"]),
                tuple(raw.get("sources", ())),
                raw.get("refusal", ""),
                int(raw.get("generation", -1)),
            )
        if kind == "commit":
            return Commit(_state(raw))
        if kind == "abort":
            return Abort(raw["epoch"], raw["reason"])
        if kind == "drained":
            return Drained(raw["epoch"], tp_parse(raw["tp"]))
        if kind == "draining":
            if raw["color"] not in COLORS or not isinstance(raw["pods"], list):
                raise ValueError(f"a draining record needs a color and a list of pods: {raw!r}")
            return Draining(raw["color"], frozenset(str(p) for p in raw["pods"]))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AssertionError) as exc:
        raise BadControlRecord(f"unreadable control record: {exc}") from exc
    raise BadControlRecord(f"unknown control record type {kind!r}")
