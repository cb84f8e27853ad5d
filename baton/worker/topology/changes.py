"""What flows between a table's processors, and what crosses topics for table operations.

A table forwards ``Change(new, old)``: its new value for the key and the one before (None
for absent), as Kafka Streams' ``Change``. Filters and mappers need both to tell
downstream "this row left" from "this row never was", a grouped aggregation needs the old
value to take it out again, and a join needs both to say what its own result was.

A grouped table sends ``Adjust(old, new)`` records through its repartition topic: take
``old`` out of the group's aggregate, put ``new`` in. One record carries both when the
row stays in its group, so the aggregate never shows the moment between the two (KIP-904).

The foreign-key join's two internal topics carry a subscription (left key, hash of the
left value, subscribe or unsubscribe) and a response (that hash, the right value); the
encodings are here so both sides agree on them.
"""

from __future__ import annotations

import hashlib
import struct
from typing import Any, NamedTuple

from baton.worker.topology.serdes import Serde, SerdeError


class Change(NamedTuple):
    """A table row's update: ``new`` and ``old`` values (None: absent)."""

    new: Any
    old: Any


class Adjust(NamedTuple):
    """A grouped-table record: take ``old`` out of the aggregate, then add ``new`` (either may be None)."""

    old: Any
    new: Any


_LEN = struct.Struct(">i")  # length of the old value; -1: no old value
_NO_NEW = b"\x00"
_HAS_NEW = b"\x01"


class AdjustSerde(Serde[Adjust]):
    """``Adjust`` over a repartition topic: old value's length, old value, a new-value flag, new value."""

    def __init__(self, inner: Serde[Any]) -> None:
        self.inner = inner

    def serialize(self, value: Adjust) -> bytes:
        old = b"" if value.old is None else self.inner.serialize(value.old)
        head = _LEN.pack(-1 if value.old is None else len(old))
        if value.new is None:
            return head + old + _NO_NEW
        return head + old + _HAS_NEW + self.inner.serialize(value.new)

    def deserialize(self, data: bytes) -> Adjust:
        if len(data) < _LEN.size + 1:
            raise SerdeError("not a grouped-table record: too short")
        (size,) = _LEN.unpack_from(data)
        at = _LEN.size + max(size, 0)
        if at >= len(data) or data[at : at + 1] not in (_NO_NEW, _HAS_NEW):
            raise SerdeError("not a grouped-table record: bad layout")
        old = None if size < 0 else self.inner.deserialize(data[_LEN.size : at])
        new = self.inner.deserialize(data[at + 1 :]) if data[at : at + 1] == _HAS_NEW else None
        return Adjust(old, new)


DIGEST_SIZE = 16
SUBSCRIBE, UNSUBSCRIBE = b"s", b"u"


def value_digest(raw: bytes) -> bytes:
    """What a response is matched against: the left value it was asked for, hashed."""
    return hashlib.blake2b(raw, digest_size=DIGEST_SIZE).digest()


def encode_subscription(op: bytes, digest: bytes, left_key: bytes) -> bytes:
    return op + digest + left_key


def decode_subscription(raw: bytes) -> tuple[bytes, bytes, bytes]:
    """(op, digest, left key bytes)."""
    op = raw[:1]
    if op not in (SUBSCRIBE, UNSUBSCRIBE) or len(raw) < 1 + DIGEST_SIZE:
        raise SerdeError("not a foreign-key subscription record")
    return op, raw[1 : 1 + DIGEST_SIZE], raw[1 + DIGEST_SIZE :]


def encode_response(digest: bytes, right_value: bytes | None) -> bytes:
    return digest + (_NO_NEW if right_value is None else _HAS_NEW + right_value)


def decode_response(raw: bytes) -> tuple[bytes, bytes | None]:
    """(digest, raw right value or None)."""
    if len(raw) < DIGEST_SIZE + 1 or raw[DIGEST_SIZE : DIGEST_SIZE + 1] not in (_NO_NEW, _HAS_NEW):
        raise SerdeError("not a foreign-key response record")
    has = raw[DIGEST_SIZE : DIGEST_SIZE + 1] == _HAS_NEW
    return raw[:DIGEST_SIZE], raw[DIGEST_SIZE + 1 :] if has else None
