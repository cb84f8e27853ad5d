"""``count()``'s functions, named so that the fast paths know them.

A count is the most common aggregation there is, and on the fused paths
(``runtime/fused.py``, ``runtime/fused_chain.py``) its aggregator is the only Python call a
record makes besides the serdes: a loop that sees ``aggregator is plus_one`` folds
``current + 1`` itself, the same expression (so the same result, and the same error on a
stored value that is no number). Lambdas would be new objects per topology, which no loop
could recognise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.worker.topology.graph import SourceNode


def zero() -> int:
    return 0


def plus_one(_key: Any, _value: Any, count: Any) -> Any:
    return count + 1


def minus_one(_key: Any, _value: Any, count: Any) -> Any:
    return count - 1


def added(_key: Any, older: Any, newer: Any) -> Any:
    """Session windows' merger: two sessions' counts add up."""
    return older + newer


def reads_no_value(node: SourceNode, aggregator: Callable[..., Any]) -> bool:
    """Whether nothing reads the values a count folds straight from ``node``: the aggregator
    is ``count()``'s and no timestamp extractor looks at them. Then a fast path only needs to
    know that a value is valid (``serdes.checking_deserializer``) or not null (``runtime/own_json.py``)."""
    return aggregator is plus_one and node.timestamp is None
