"""Serdes and time windows: pure functions."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ConfigDict

from baton import JSON, LONG, STR, Json, SerdeError, Windowed, hopping, tumbling
from baton.worker.topology.windows import TimeWindows, WindowedSerde

pytestmark = pytest.mark.unit


class Click(BaseModel):
    model_config = ConfigDict(strict=True)
    user_id: str
    timestamp: int


def test_json_round_trip_and_malformed_input_is_a_serde_error() -> None:
    assert JSON.deserialize(JSON.serialize({"a": [1, 2]})) == {"a": [1, 2]}
    assert JSON.serialize(5) == b"5"
    with pytest.raises(SerdeError):
        JSON.deserialize(b"{nope")


def test_model_serde_rejects_wrong_types() -> None:
    serde = Json(Click)
    assert serde.deserialize(b'{"user_id": "a", "timestamp": 3}') == Click(user_id="a", timestamp=3)
    for bad in (b'{"user_id": "a", "timestamp": "3"}', b"[1]", b'{"user_id": "a"}', b""):
        with pytest.raises(SerdeError):
            serde.deserialize(bad)


def test_str_and_long_serdes() -> None:
    assert STR.deserialize("é".encode()) == "é"
    with pytest.raises(SerdeError):
        STR.deserialize(b"\xff")
    assert LONG.serialize(1) == b"\x00" * 7 + b"\x01"
    assert LONG.deserialize(LONG.serialize(-5)) == -5
    with pytest.raises(SerdeError):
        LONG.deserialize(b"\x01")


def test_tumbling_windows_contain_the_record_once() -> None:
    w = tumbling(10)
    assert w.starts_for(0) == [0]
    assert w.starts_for(9) == [0]
    assert w.starts_for(10) == [10]
    assert w.starts_for(12345) == [12340]


def test_hopping_windows_overlap_and_start_at_zero() -> None:
    w = hopping(10, 5)
    assert w.starts_for(12) == [5, 10]
    assert w.starts_for(3) == [0]  # no window starts before the epoch
    assert w.starts_for(15) == [10, 15]
    assert hopping(10, 3).starts_for(10) == [3, 6, 9]


def test_windows_reject_gaps_and_nonsense() -> None:
    with pytest.raises(ValueError):
        TimeWindows(5, 10)
    with pytest.raises(ValueError):
        TimeWindows(0, 0)


def test_windowed_serde_uses_kafka_streams_layout() -> None:
    serde = WindowedSerde(STR, 1000)
    raw = serde.serialize(Windowed("alice", 2000, 3000))
    assert raw == b"alice" + (2000).to_bytes(8, "big")
    assert serde.deserialize(raw) == Windowed("alice", 2000, 3000)
    with pytest.raises(SerdeError):
        serde.deserialize(b"abc")
