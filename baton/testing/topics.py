"""The test driver's topics as a test sees them: typed records in, typed records out.

Kafka Streams' ``TestInputTopic`` and ``TestOutputTopic``: an input topic serializes with
the serdes the topology reads the topic with, an output topic deserializes with the serdes
its sink writes with, so a test speaks in the topology's own types and a serde bug shows
up as it would against a broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import orjson
from pydantic import BaseModel

from baton.worker.runtime.record import Record
from baton.worker.topology.context import Headers
from baton.worker.topology.serdes import ModelSerde, Serde


@dataclass(frozen=True)
class TestRecord:
    """One record read from an output topic, decoded (or raw bytes, without serdes)."""

    __test__ = False  # not a pytest class, despite its name

    key: Any
    value: Any
    timestamp: int
    headers: Headers | None
    partition: int
    offset: int


class Pipes(Protocol):
    """The driver as an input topic uses it: one record in, processed to completion."""

    def pipe_raw(  # noqa: PLR0917 - one record's parts
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        timestamp: int | None,
        headers: Headers | None,
        partition: int | None,
    ) -> None: ...


def _serialize(serde: Serde[Any], value: Any) -> bytes:
    """``value`` as the topic holds it; a dict for a model's topic is written as plain JSON, as a
    producer that knows nothing of the model would, and the topology's serde validates it."""
    if isinstance(serde, ModelSerde) and not isinstance(value, BaseModel):
        return orjson.dumps(value)
    return serde.serialize(value)


class TestInputTopic:
    """Records piped here are processed, with everything they cause downstream, before ``pipe`` returns."""

    __test__ = False

    def __init__(self, driver: Pipes, topic: str, key_serde: Serde[Any], value_serde: Serde[Any]) -> None:
        self._driver, self.topic = driver, topic
        self._key_serde, self._value_serde = key_serde, value_serde

    def pipe(
        self,
        key: Any,
        value: Any,
        *,
        timestamp: int | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None:
        """One record; ``timestamp`` defaults to the driver's wall clock, ``partition`` to the key's.

        A ``None`` key or value stays ``None`` (a tombstone, for a table's topic)."""
        raw_key = None if key is None else _serialize(self._key_serde, key)
        raw_value = None if value is None else _serialize(self._value_serde, value)
        self._driver.pipe_raw(self.topic, raw_key, raw_value, timestamp, headers, partition)

    def pipe_raw(
        self,
        key: bytes | None,
        value: bytes | None,
        *,
        timestamp: int | None = None,
        headers: Headers | None = None,
        partition: int | None = None,
    ) -> None:
        """Bytes as they are, past the serdes: a malformed record, to test the dead-letter path."""
        self._driver.pipe_raw(self.topic, key, value, timestamp, headers, partition)

    def pipe_key_values(self, records: Iterable[tuple[Any, Any]], *, timestamp: int | None = None) -> None:
        """Several records in order, all at ``timestamp`` (the wall clock by default)."""
        for key, value in records:
            self.pipe(key, value, timestamp=timestamp)


class TestOutputTopic:
    """What the topology wrote to a topic, read in order; each record is read once, as a consumer would."""

    __test__ = False

    def __init__(
        self,
        records: Sequence[Record],
        topic: str,
        key_serde: Serde[Any] | None,
        value_serde: Serde[Any] | None,
    ) -> None:
        """``records`` is the driver's log of the topic, which grows as the topology writes;
        without serdes keys and values are read as the bytes they are."""
        self._records, self.topic = records, topic
        self._key_serde, self._value_serde = key_serde, value_serde
        self._next = 0

    def is_empty(self) -> bool:
        return self._next >= len(self._records)

    def queue_size(self) -> int:
        return len(self._records) - self._next

    def read_record(self) -> TestRecord:
        if self.is_empty():
            raise LookupError(f"no more records in {self.topic!r}")
        raw = self._records[self._next]
        self._next += 1
        key, value = raw.key(), raw.value()
        return TestRecord(
            key=key if key is None or self._key_serde is None else self._key_serde.deserialize(key),
            value=value
            if value is None or self._value_serde is None
            else self._value_serde.deserialize(value),
            timestamp=raw.timestamp()[1],
            headers=raw.headers(),
            partition=raw.partition() or 0,
            offset=raw.offset() or 0,
        )

    def read_records(self) -> list[TestRecord]:
        out = []
        while not self.is_empty():
            out.append(self.read_record())
        return out

    def read_key_value(self) -> tuple[Any, Any]:
        record = self.read_record()
        return record.key, record.value

    def read_value(self) -> Any:
        return self.read_record().value

    def read_key_values(self) -> list[tuple[Any, Any]]:
        return [(r.key, r.value) for r in self.read_records()]

    def read_values(self) -> list[Any]:
        return [r.value for r in self.read_records()]

    def read_key_values_to_map(self) -> dict[Any, Any]:
        """The latest value per key (a table's view of the topic); a ``None`` value deletes the key."""
        out: dict[Any, Any] = {}
        for key, value in self.read_key_values():
            if value is None:
                out.pop(key, None)
            else:
                out[key] = value
        return out
