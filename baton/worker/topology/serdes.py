"""Serdes: how keys and values become bytes on Kafka and back.

A serde is a pair of pure functions. Deserialization errors are raised as
:class:`SerdeError` so the task can tell "this record is bad" (dead-letter it) apart
from "the engine is broken" (crash). ``None`` never reaches a serde: a missing key or a
tombstone value stays ``None`` end to end, as in Kafka Streams.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import orjson
from pydantic import BaseModel, ValidationError
from pydantic_core import SchemaValidator

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)


class SerdeError(ValueError):
    """A record's bytes do not match the serde (bad input, not a bug in the engine)."""


class Serde(ABC, Generic[T]):
    """Turns ``T`` into bytes and back. Subclass it for user-defined formats."""

    @abstractmethod
    def serialize(self, value: T) -> bytes: ...

    @abstractmethod
    def deserialize(self, data: bytes) -> T: ...


class BytesSerde(Serde[bytes]):
    def serialize(self, value: bytes) -> bytes:
        return value

    def deserialize(self, data: bytes) -> bytes:
        return data


class StrSerde(Serde[str]):
    """UTF-8 text; invalid UTF-8 is bad input."""

    def serialize(self, value: str) -> bytes:
        return value.encode()

    def deserialize(self, data: bytes) -> str:
        try:
            return data.decode()
        except UnicodeDecodeError as exc:
            raise SerdeError(f"not UTF-8: {exc}") from exc


class LongSerde(Serde[int]):
    """8-byte big-endian signed integers: Kafka's ``Serdes.Long()``, for interop with JVM apps."""

    _fmt = struct.Struct(">q")

    def serialize(self, value: int) -> bytes:
        return self._fmt.pack(value)

    def deserialize(self, data: bytes) -> int:
        try:
            return int(self._fmt.unpack(data)[0])
        except struct.error as exc:
            raise SerdeError(f"not an 8-byte long: {exc}") from exc


class JsonSerde(Serde[Any]):
    """JSON through orjson: any JSON value (dicts, lists, numbers, strings)."""

    def serialize(self, value: Any) -> bytes:
        return orjson.dumps(value)

    def deserialize(self, data: bytes) -> Any:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise SerdeError(f"malformed JSON: {exc}") from exc


class ModelSerde(Serde[M]):
    """JSON validated against a pydantic model: wrong types are bad input, caught at the edge.

    Use a strict model (``model_config = ConfigDict(strict=True)``) when ``"5"`` must not
    pass for ``5``.
    """

    def __init__(self, model: type[M]) -> None:
        self.model = model
        # The compiled validator itself, one call per record instead of two: a model whose
        # forward references are not resolved yet keeps pydantic's own (rebuilding) path.
        self._validate_json: Callable[[bytes], M] = (
            model.__pydantic_validator__.validate_json
            if model.__pydantic_complete__
            else model.model_validate_json
        )

    def serialize(self, value: M) -> bytes:
        return value.model_dump_json().encode()

    def deserialize(self, data: bytes) -> M:
        try:
            return self._validate_json(data)
        except ValidationError as exc:
            raise SerdeError(f"invalid {self.model.__name__}: {exc.errors(include_url=False)}") from exc


BYTES = BytesSerde()
STR = StrSerde()
LONG = LongSerde()
JSON = JsonSerde()


def Json(model: type[M]) -> ModelSerde[M]:  # noqa: N802 - reads like a type in topologies
    """``Json(Click)``: JSON values validated as the pydantic model ``Click``."""
    return ModelSerde(model)


def fast_deserializer(serde: Serde[T]) -> Callable[[bytes], T]:
    """The C function behind a built-in serde's ``deserialize``, without its error wording.

    It returns what ``deserialize`` returns for ``bytes`` it accepts and raises *something*
    otherwise: a caller on the per-record path then calls ``deserialize`` itself, which
    takes what the serde takes (``bytes.decode`` refuses a ``bytearray``) and raises the
    serde's own error, worded for the dead letter. A saved Python call a record
    (``runtime/fused.py``). Exact types only: a subclass may have changed ``deserialize``.
    """
    kind = type(serde)
    if kind is StrSerde:
        return bytes.decode  # type: ignore[return-value]
    if kind is JsonSerde:
        return orjson.loads
    if kind is ModelSerde:
        return serde._validate_json  # type: ignore[attr-defined,no-any-return]
    return serde.deserialize


def checking_deserializer(serde: Serde[Any]) -> Callable[[bytes], object]:
    """For a reader that never looks at the value (a count): accepts and refuses what ``fast_deserializer`` does.

    A pydantic model's validator does two things: it checks the JSON against the fields'
    schema, then builds the model instance. A count needs only the first (a click that is
    not a ``Click`` is still a dead letter), so for a plain model this is pydantic's own
    validator of the model's fields (with its ``before`` validators, which pydantic puts
    inside the model's schema), which returns the fields' values (never ``None``) and
    builds no instance: a third of the validator's work on a small model. A model whose
    instance does more than hold the fields keeps the whole validator: a custom
    ``__init__``, ``model_post_init`` (private attributes included), a root model, an
    ``after`` or ``wrap`` model validator (then the schema's outer type is not ``model``), a
    schema with shared definitions. Every other serde: ``fast_deserializer``.
    """
    model = serde.model if type(serde) is ModelSerde else None
    if model is not None and model.__pydantic_complete__:
        schema: Any = model.__pydantic_core_schema__
        plain = (
            schema.get("type") == "model"
            and not schema.get("custom_init")
            and not schema.get("root_model")
            and not schema.get("post_init")
        )
        if plain:
            try:
                return SchemaValidator(schema["schema"], schema.get("config")).validate_json
            except Exception:  # a schema this validator cannot stand alone for: the whole one
                pass
    return fast_deserializer(serde)


def fast_serializer(serde: Serde[T]) -> Callable[[T], bytes]:
    """The C function behind a built-in serde's ``serialize``, without its Python frame.

    The counterpart of ``fast_deserializer``: it returns what ``serialize`` returns for every
    value it accepts and raises *something* otherwise (``str.encode`` refuses an int with
    other words than ``value.encode()``); a caller on the per-record path then calls
    ``serialize`` itself, which raises the serde's own error for the dead letter. Exact
    types only: a subclass may have changed ``serialize``.
    """
    kind = type(serde)
    if kind is StrSerde:
        return str.encode  # type: ignore[return-value]
    if kind is JsonSerde:
        return orjson.dumps
    if kind is LongSerde:
        return LongSerde._fmt.pack
    return serde.serialize


def round_trips(serde: Serde[Any]) -> bool:
    """Whether ``serialize(deserialize(b)) == b`` for all bytes ``deserialize`` accepts.

    Then the bytes a record's key arrived in are the key's bytes in a store with the same
    serde, and need not be made again. Exact types only, as in ``fast_deserializer``.
    """
    return type(serde) in {BytesSerde, StrSerde, LongSerde}


def decodes_alike(serde: Serde[Any]) -> bool:
    """Whether ``deserialize(serialize(deserialize(b))) == deserialize(b)`` for all bytes it accepts.

    Weaker than ``round_trips``: JSON's bytes may come back otherwise (spacing, ``1e2`` as
    ``100.0``, a repeated name once) but decode to an equal value (orjson parses what it
    writes to the same value). Enough for the values of a repartition topic, which only
    this serde reads again, so a line of steps that left a value as it was forwards the
    bytes it arrived in (``runtime/fused_chain.py``). Never enough for a key: its bytes pick
    the partition and are the store's key.
    """
    return round_trips(serde) or type(serde) is JsonSerde


def same_bytes(a: Serde[Any], b: Serde[Any]) -> bool:
    """Whether two serdes serialize every value to the same bytes: one serde, or built-in ones of one kind.

    (A model serde's bytes depend on its model, and a user's serde on anything; a serde is a
    pair of pure functions, so one object agrees with itself: a windowed table's key serde
    and the sink's after ``to_stream().to(...)``.)
    """
    return a is b or (type(a) is type(b) and type(a) in {BytesSerde, StrSerde, LongSerde, JsonSerde})
