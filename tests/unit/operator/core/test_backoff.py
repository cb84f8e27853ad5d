"""The operator's API retry backoffs never run out (an exhausted retry ends kopf's watch for good)."""

from __future__ import annotations

import itertools
from collections.abc import Sized

from baton.operator.core.backoff import FIRST_S, STEADY_S, EndlessBackoff


def test_starts_like_kopf_then_keeps_a_steady_pace() -> None:
    got = list(itertools.islice(EndlessBackoff(), len(FIRST_S) + 100))
    assert tuple(got[: len(FIRST_S)]) == FIRST_S
    assert set(got[len(FIRST_S) :]) == {STEADY_S}


def test_every_read_starts_over() -> None:
    # kopf iterates the setting once per request: a generator would be spent after one outage.
    backoff = EndlessBackoff(first=(1, 2), steady=5)
    first = list(itertools.islice(backoff, 4))
    again = list(itertools.islice(backoff, 4))
    assert first == again == [1, 2, 5, 5]


def test_has_no_length_so_kopf_never_reaches_its_last_attempt() -> None:
    assert not isinstance(EndlessBackoff(), Sized)
