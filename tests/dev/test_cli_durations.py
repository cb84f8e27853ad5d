"""The kubectl and helm calls' deadline follows a call's own ``--timeout`` (Go duration text)."""

from __future__ import annotations

import pytest

from tests.support.durations import cli_deadline, go_duration_seconds


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("180s", 180.0),
        ("2m", 120.0),
        ("1m30s", 90.0),
        ("1h", 3600.0),
        ("500ms", 0.5),
        ("1.5m", 90.0),
        ("0", 0.0),
    ],
)
def test_go_durations_read_as_seconds(text: str, seconds: float) -> None:
    assert go_duration_seconds(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "180", "3 m", "5x", "1m30"])
def test_anything_else_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a Go duration"):
        go_duration_seconds(text)


def test_a_wait_longer_than_the_floor_gets_its_own_timeout_and_a_margin() -> None:
    assert cli_deadline(("wait", "--for=condition=Ready", "sapp/x", "--timeout=180s")) == 210.0
    assert cli_deadline(("wait", "--timeout=30s")) == 120.0
    assert cli_deadline(("get", "pods")) == 120.0
