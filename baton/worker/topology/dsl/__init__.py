"""The topology DSL: Kafka Streams' shape, Python's manners.

    topology = Topology()
    (topology.stream("clicks", key=STR, value=JSON)
        .group_by_key()
        .count(store="user-counts")
        .to_stream()
        .to("user_counts", value=JSON))

Each call appends a node to an inert graph (``graph.py``); nothing touches Kafka until a
worker runs the built topology. Serdes flow along the stream: an operation keeps the
serdes it was given unless told otherwise, so ``to(topic)`` usually needs none.
Operations that may change the key (``map``, ``flat_map``, ``group_by``) mark the stream,
and a later grouping goes through a repartition topic so that equal keys meet in one
task, as in Kafka Streams.

The package, one module per side of the DSL: ``builder.py`` (``Topology``: the entry
points and ``build()``), ``stream.py`` (``Stream``, its branches, ``GroupedStream``),
``table.py`` (``Table``, ``GroupedTable``, ``GlobalTable``, ``suppress``) and ``base.py``
(``TopologyError`` and the handle they all hold). Streams and tables return each other:
``stream.py`` imports ``table.py``, and ``Table.to_stream`` imports ``Stream`` when called.
What is not DSL surface lives apart: the graph (``graph.py``), windows, serdes, changes,
custom processors.
"""

from baton.worker.topology.dsl.base import Joiner, TopologyError
from baton.worker.topology.dsl.builder import Topology
from baton.worker.topology.dsl.stream import (
    Branched,
    BranchedStream,
    GroupedStream,
    Stream,
    StreamJoinOptions,
)
from baton.worker.topology.dsl.table import (
    GlobalTable,
    GroupedTable,
    Suppressed,
    Table,
    TableJoinOptions,
    until_window_closes,
)

__all__ = [
    "Branched",
    "BranchedStream",
    "GlobalTable",
    "GroupedStream",
    "GroupedTable",
    "Joiner",
    "Stream",
    "StreamJoinOptions",
    "Suppressed",
    "Table",
    "TableJoinOptions",
    "Topology",
    "TopologyError",
    "until_window_closes",
]
