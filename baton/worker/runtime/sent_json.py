"""JSON value bytes this process wrote to its repartition topics: a count reading them back needs no parse.

``group_by(...).count()`` (windowed or not) decoded each record's value twice: the input's,
and the repartition topic's, where a count only needs to know that the value is there and
is JSON (a value that is not goes to the dead-letter topic). When the task reading a
repartition partition runs in the process that wrote it (one process does both, or its
share of the partitions), the bytes it reads back are bytes written here: parsed on the way
in (forwarded as they arrived, ``serdes.decodes_alike``) or made by orjson, valid JSON either
way, so a set membership (a hash) stands for the parse and the dict it builds. Only values are
noted, never a JSON ``null``: a count skips a null value as it skips a tombstone, and would
count a noted one (``test_fast_path_models.py`` checks the sink's side and the count's). A record
this set does not hold (another process wrote it, the set was emptied, or something else
wrote the topic) is parsed as before. Only the processing thread touches it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from baton.worker.topology.counting import reads_no_value
from baton.worker.topology.serdes import JsonSerde

if TYPE_CHECKING:
    from baton.worker.topology.graph import SourceNode

# value bytes of the repartition records sent since the set was last emptied
SENT: set[bytes] = set()
# records between a send and its read-back in the same process: a few thousand when the
# worker keeps up; on a backlog, the consumer's prefetch of the input, far more (1.3 % found
# on a 300,000-click backlog). Past this the set starts over, and the reads it forgot parse
# again: a bound on memory, not a guess at the distance.
LIMIT = 32_768


def make_room() -> set[bytes]:
    """The set, emptied first when full: called once per run, not per record."""
    if len(SENT) > LIMIT:
        SENT.clear()
    return SENT


def read_back(node: SourceNode, aggregator: Callable[..., Any]) -> bool:
    """Whether a count fed straight from ``node`` may take a value this set holds as read:
    a repartition topic of plain JSON, whose values nothing reads (no timestamp extractor),
    counted. Both fused loops ask this; ``FusedChain`` only with no steps before the count."""
    return reads_no_value(node, aggregator) and node.internal and type(node.value_serde) is JsonSerde
