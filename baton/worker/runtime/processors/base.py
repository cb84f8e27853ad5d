"""What every processor is: a node of a task's tree, and how a family makes its nodes.

A record is pushed through the whole tree (``process`` calls ``forward`` calls the
children's ``process``) before the next record is read: record-at-a-time, depth first,
as in Kafka Streams. Processors hold no Kafka client; sinks and stores write through
the ``Send`` function the runtime gives the task.

``forward`` is bound once the children are known (``connect``): the child's own
``process`` when there is one child (most nodes), a fan-out only for branches. That
saves a Python call per record and hop, which profiles of the click counter showed to be
a large part of the framework's per-record cost.

Each family module (stateless, aggregate, windowed, joins, table, custom) ends with a
``FACTORIES`` table, ``{node type: factory}``: a factory makes a node's processor for one
task from a ``Build``. ``runtime/tree.py`` merges the tables and looks each node up, so a
new kind of node is one class and one entry in its family, not a branch in the builder.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from baton.worker.runtime.punctuation import Punctuations
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import TaskStore
from baton.worker.topology.context import RecordContext, Send, SinkGate
from baton.worker.topology.graph import MergeNode, Node, PassThroughNode, SourceNode


def drop(_key: Any, _value: Any) -> None:
    """``forward`` of a processor without children (a terminal node): nothing downstream."""


class ProcessorNode:
    """A node of a task's processor tree (Kafka Streams' ``ProcessorNode``); as itself, a pass-through.

    Not the public ``baton.Processor`` a user subclasses: that one runs inside a
    ``CustomProcessor`` node (``processors/custom.py``).
    """

    __slots__ = ("children", "forward")

    def __init__(self) -> None:
        self.children: list[ProcessorNode] = []
        self.forward: Callable[[Any, Any], None] = drop

    def connect(self, children: list[ProcessorNode]) -> None:
        """Set the children and bind ``forward`` to them."""
        self.children = children
        if len(children) == 1:
            self.forward = children[0].process
        elif children:
            self.forward = self._fan_out
        else:
            self.forward = drop

    def process(self, key: Any, value: Any) -> None:
        self.forward(key, value)

    def _fan_out(self, key: Any, value: Any) -> None:
        for child in self.children:
            child.process(key, value)


@dataclass(frozen=True, slots=True)
class Build:
    """What a factory may use to make a node's processor for one task.

    The task's record context, stores and output (``send`` behind the sink ``gate``), and
    two ways into the tree being built: ``processor_of`` for a node whose processor another
    one calls directly (a join's sides call the join), ``value_of`` for a table's value
    getter (a join looks rows up). Both come from the builder, so no family imports the
    builder (a circle) or the table family's getters to reach them.
    """

    ctx: RecordContext
    send: Send
    gate: SinkGate
    stores: dict[str, TaskStore]
    global_stores: Mapping[str, KeyValueStore]
    topic_name: Callable[[str, bool], str]
    on_late: Callable[[], None]
    punctuations: Punctuations | None
    stream_time: Callable[[], int]
    processor_of: Callable[[Node], ProcessorNode]
    value_of: Callable[[Node], Callable[[Any], Any]]


# node -> its processor; the node is typed Any here as each factory takes its own node type
Factory = Callable[[Any, Build], ProcessorNode]


def straight_processor(root: ProcessorNode) -> ProcessorNode | None:
    """The one processor a source's records go to, past a merge's pass-throughs (plain
    ``ProcessorNode``s); None when they go to more than one. The fast paths and the general
    path's choice of deserializer ask it."""
    node = root
    while len(node.children) == 1:
        node = node.children[0]
        if type(node) is not ProcessorNode:
            return node
    return None


def _pass_through(_node: Node, _build: Build) -> ProcessorNode:
    return ProcessorNode()


FACTORIES: dict[type[Node], Factory] = {
    SourceNode: _pass_through,
    PassThroughNode: _pass_through,
    MergeNode: _pass_through,
}
