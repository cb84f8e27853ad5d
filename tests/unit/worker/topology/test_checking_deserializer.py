"""``serdes.checking_deserializer``: a count's check of a value accepts exactly what the model's validator accepts.

The fused loop (``runtime/fused.py``) checks a counted value with the model's fields'
validator and builds no instance. A value one accepts and the other refuses would be a
record counted on one path and dead-lettered on the other, so the property is checked over
random JSON, for models of every kind: plain ones take the shortcut, the ones whose
instance does more than hold fields must keep the whole validator.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from baton import Json
from baton.worker.topology.serdes import ModelSerde, checking_deserializer, fast_deserializer

pytestmark = pytest.mark.unit


class Click(BaseModel):
    model_config = ConfigDict(strict=True)
    user_id: str
    timestamp: int


class Page(BaseModel):
    path: str
    weight: float = 1.0


class Visit(BaseModel):
    """Lax, with a default, an alias, a nested model, a list, a field validator and a before validator."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
    user_id: str = Field(alias="user")
    n: int = 0
    page: Page | None = None
    tags: list[int] = []

    @field_validator("n")
    @classmethod
    def _not_negative(cls, n: int) -> int:
        if n < 0:
            raise ValueError("negative")
        return n

    @model_validator(mode="before")
    @classmethod
    def _no_bots(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("user") == "bot":
            raise ValueError("a bot")
        return data


class AfterCheck(BaseModel):
    """An ``after`` model validator refuses what the fields accept: the whole validator is kept."""

    a: int
    b: int = 0

    @model_validator(mode="after")
    def _ordered(self) -> AfterCheck:
        if self.a > self.b:
            raise ValueError("a > b")
        return self


class PostInit(BaseModel):
    a: int

    def model_post_init(self, context: Any, /) -> None:
        if self.a == 3:
            raise ValueError("three")


class Private(BaseModel):
    a: int
    _seen: int = PrivateAttr(default=0)


class Tree(BaseModel):
    """Recursive: its schema has shared definitions."""

    a: int
    children: list[Tree] = []


PLAIN = [Click, Visit]
WHOLE = [AfterCheck, PostInit, Private, Tree]

NAMES = ["user_id", "timestamp", "user", "n", "page", "tags", "a", "b", "children", "path", "weight", "x"]
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from([1.5, 3.0, -0.0]),
    st.sampled_from(["", "bot", "u1", "3", "1.5", "true"]),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.sampled_from(NAMES), inner, max_size=4)
    ),
    max_leaves=8,
)
DOCUMENTS = st.one_of(
    st.dictionaries(st.sampled_from(NAMES), JSON_VALUES, max_size=5).map(orjson.dumps),
    JSON_VALUES.map(orjson.dumps),
    st.sampled_from(
        [
            b"",
            b"{bad",
            b'{"a": 1,}',
            b'{"a": 1, "a": "x"}',  # a repeated name
            b'{"a": 1} x',
            b"\xff",
            b'{"user_id": "u", "timestamp": 1180591620717411303424, "a": 1180591620717411303424}',  # past 64 bits
            b'{"user": "u", "n": 1e400}',
        ]
    ),
)


def _accepts(check: Any, data: bytes) -> bool:
    try:
        return check(data) is not None
    except Exception:
        return False


@pytest.mark.parametrize("model", PLAIN + WHOLE, ids=lambda m: m.__name__)
@settings(max_examples=400, deadline=None)
@given(data=DOCUMENTS)
def test_a_count_refuses_exactly_what_the_model_refuses(model: type[BaseModel], data: bytes) -> None:
    serde: ModelSerde[Any] = Json(model)
    assert _accepts(checking_deserializer(serde), data) == _accepts(fast_deserializer(serde), data)


@pytest.mark.parametrize("model", PLAIN, ids=lambda m: m.__name__)
def test_a_plain_model_is_checked_without_its_instance(model: type[BaseModel]) -> None:
    check = checking_deserializer(Json(model))
    assert check != fast_deserializer(Json(model))
    valid = b'{"user_id": "u1", "timestamp": 3}' if model is Click else b'{"user": "u1", "n": 2}'
    checked = check(valid)
    assert checked is not None and not isinstance(checked, BaseModel)


@pytest.mark.parametrize("model", WHOLE, ids=lambda m: m.__name__)
def test_a_model_whose_instance_does_more_keeps_the_whole_validator(model: type[BaseModel]) -> None:
    serde = Json(model)
    assert checking_deserializer(serde) == fast_deserializer(serde)
