"""``count()``'s functions, named so that the fast paths know them.

A count is the most common aggregation there is, and on the fused paths
(``runtime/fused.py``, ``runtime/fused_chain.py``) its aggregator is the only Python call a
record makes besides the serdes: a loop that sees ``aggregator is plus_one`` folds
``current + 1`` itself, the same expression (so the same result, and the same error on a
stored value that is no number). Lambdas would be new objects per topology, which no loop
could recognise.
"""

from __future__ import annotations

from typing import Any


def zero() -> int:
    return 0


def plus_one(_key: Any, _value: Any, count: Any) -> Any:
    return count + 1


def minus_one(_key: Any, _value: Any, count: Any) -> Any:
    return count - 1


def added(_key: Any, older: Any, newer: Any) -> Any:
    """Session windows' merger: two sessions' counts add up."""
    return older + newer
