"""One task's processors, made from its sub-topology's nodes, and the fast path each source takes.

Kept apart from the processors themselves: each family registers its node types in a
``FACTORIES`` table (``runtime/processors/``), and this module merges the tables, looks
each node up, connects the tree, and knows how a table's changes reach consumers that want
plain records (an aggregation read both by ``to_stream()`` and by a table operation).
``fast_path`` then picks, per source, a loop that runs its records through the tree in one
frame when the tree below it is a shape that loop knows exactly (``runtime/fused.py``,
``runtime/fused_chain.py``); every other source keeps the general path.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from baton.worker.runtime.fused import fuse
from baton.worker.runtime.fused_chain import chain
from baton.worker.runtime.processors import aggregate, base, custom, joins, stateless, table
from baton.worker.runtime.processors.base import Build, Factory, ProcessorNode
from baton.worker.runtime.processors.table import ToStreamProcessor, value_getter
from baton.worker.runtime.punctuation import NO_TIME, Punctuations
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import TaskStore
from baton.worker.topology.context import RecordContext, Send, SinkGate
from baton.worker.topology.graph import AggregateNode, Node, SourceNode, takes_changes

if TYPE_CHECKING:
    from baton.worker.runtime.record import Message
    from baton.worker.runtime.task import DeadLetter


def _merged(*families: Mapping[type[Node], Factory]) -> dict[type[Node], Factory]:
    """One table of every family's node types; a node type claimed twice is a mistake, caught at import."""
    merged: dict[type[Node], Factory] = {}
    for family in families:
        twice = merged.keys() & family.keys()
        assert not twice, f"node types with two factories: {sorted(t.__name__ for t in twice)}"
        merged.update(family)
    return merged


# ``processors/windowed.py`` has no table: its processors are ``AggregateNode``s, which
# ``aggregate``'s factory makes by the node's windows
FACTORIES = _merged(
    base.FACTORIES,
    stateless.FACTORIES,
    aggregate.FACTORIES,
    joins.FACTORIES,
    table.FACTORIES,
    custom.FACTORIES,
)


def build_tree(
    source: SourceNode,
    *,
    ctx: RecordContext,
    send: Send,
    gate: SinkGate,
    stores: dict[str, TaskStore],
    tables: Mapping[str, Callable[[bytes], bytes | None]],
    global_stores: Mapping[str, KeyValueStore],
    topic_name: Callable[[str, bool], str],
    memo: dict[int, ProcessorNode],
    on_late: Callable[[], None] = lambda: None,
    punctuations: Punctuations | None = None,
    stream_time: Callable[[], int] = lambda: NO_TIME,
) -> ProcessorNode:
    """Instantiate the processors below ``source`` for one task (``memo`` shares nodes between sources)."""

    def make(node: Node) -> ProcessorNode:
        if id(node) in memo:
            return memo[id(node)]
        factory = FACTORIES.get(type(node))
        if factory is None:  # pragma: no cover - the DSL makes no other nodes
            raise TypeError(f"no processor for {type(node).__name__}")
        proc = factory(node, build)
        memo[id(node)] = proc
        children = [make(child) for child in node.children]
        if isinstance(node, AggregateNode) and any(takes_changes(c) for c in node.children):
            # table operations read this aggregation's changes; to_stream() readers get values
            stores[node.store.name].forward_changes = True
            children = [
                c if takes_changes(n) else _values_of(c) for n, c in zip(node.children, children, strict=True)
            ]
        proc.connect(children)
        return proc

    build = Build(
        ctx=ctx,
        send=send,
        gate=gate,
        stores=stores,
        global_stores=global_stores,
        topic_name=topic_name,
        on_late=on_late,
        punctuations=punctuations,
        stream_time=stream_time,
        processor_of=make,
        value_of=lambda node: value_getter(node, stores, tables),
    )
    return make(source)


def _values_of(child: ProcessorNode) -> ProcessorNode:
    """An adapter in front of ``child``: a table's changes in, their new values out."""
    adapter = ToStreamProcessor()
    adapter.connect([child])
    return adapter


class FastPath(Protocol):
    """A loop that runs a source's records through its tree in one frame (``FusedAggregate``, ``FusedChain``).

    ``run`` takes ``messages[start:stop]`` up to the end of the run or a record the loop
    hands back to the general path, and leaves the index it stopped at in ``stopped``
    (``Task._process_fused`` reads both).
    """

    stopped: int

    def run(self, messages: Sequence[Message], start: int, stop: int) -> None: ...


def fast_path(
    source: SourceNode,
    root: ProcessorNode,
    ctx: RecordContext,
    dead_letter: DeadLetter,
    *,
    partition: int,
    custom: bool,
    tables: Mapping[str, KeyValueStore],
) -> FastPath | None:
    """The loop for ``source``'s records when the tree below it is a shape one knows exactly, else None.

    A source feeding an aggregation directly takes ``FusedAggregate``; a line of stateless
    steps into a sink or an aggregation, ``FusedChain``. A sub-topology with custom
    processors keeps the general path (punctuators need the task's stream time).
    ``tables``: the stores of the tables the task only looks up (tailed).
    """
    if custom:
        return None
    return fuse(source, root, ctx, dead_letter, partition=partition, custom=False) or chain(
        source, root, ctx, dead_letter, partition=partition, tables=tables
    )
