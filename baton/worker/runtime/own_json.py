"""A count fed straight from Baton's own repartition topic of JSON takes each value as read.

``group_by(...).count()`` (windowed or not) decoded each record's value twice: the input's,
and the repartition topic's. A count reads no value: it only skips a null one, a tombstone
or JSON ``null``, as Kafka Streams' count does. And a repartition topic's values are Baton's
own: its sinks write the bytes of values that passed the serde on the way in (forwarded as
they arrived, ``serdes.decodes_alike``) or orjson's, and a None value as a tombstone. So the
source of such a count takes a value's bytes as the value (``b"null"``, orjson's NaN, as
None), on the fused loops and on the general path alike.

What it gives up: a value on that topic that is not JSON (something other than Baton wrote
the internal topic, or an earlier revision with another value serde did) is counted instead
of dead-lettered. A count of it is what a count of records means, and a value serde check
of an internal topic guarded nothing else.

Measured (docs/benchmarks.md, "Measured design choices": own-json): valgrind over a whole
worker of the windowed topology on a 120,000-click backlog, at-least-once, 45,287
instructions a click against 51,410 with the set of sent values this replaced (a backlog
outgrows it, so the values were parsed again).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.worker.runtime.processors.base import ProcessorNode, straight_processor
from baton.worker.topology.counting import reads_no_value
from baton.worker.topology.serdes import JsonSerde

if TYPE_CHECKING:
    from baton.worker.topology.graph import SourceNode

NULL = b"null"  # what orjson writes for None (and NaN): the one JSON null Baton's sinks write


def own_json_value(raw: bytes) -> bytes | None:
    """The general path's deserializer of such a source (the fused loops inline it)."""
    return None if raw == NULL else raw


def takes_as_read(node: SourceNode, aggregator: Callable[..., Any]) -> bool:
    """Whether a count with ``aggregator`` fed straight from ``node`` takes its values as read:
    a repartition topic of plain JSON, whose values nothing reads (no timestamp extractor)."""
    return reads_no_value(node, aggregator) and node.internal and type(node.value_serde) is JsonSerde


def straight_aggregator(root: ProcessorNode) -> Callable[..., Any] | None:
    """The aggregator of the aggregation a source's records go straight into (through a
    merge's pass-throughs), None when they go anywhere else too."""
    aggregator = getattr(straight_processor(root), "aggregator", None)
    return aggregator if callable(aggregator) else None
