"""Progress lines of long node tests, printed as they happen."""

from __future__ import annotations

import pytest


def say(capsys: pytest.CaptureFixture[str], line: str) -> None:
    """Progress goes to the terminal as it happens, so a CI log shows where a slow run is."""
    with capsys.disabled():
        print(line, flush=True)
