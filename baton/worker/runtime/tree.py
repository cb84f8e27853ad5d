"""One task's processors, made from its sub-topology's nodes.

Kept apart from the processors themselves: each family registers its node types in a
``FACTORIES`` table (``runtime/processors/``), and this module merges the tables, looks
each node up, connects the tree, and knows how a table's changes reach consumers that want
plain records (an aggregation read both by ``to_stream()`` and by a table operation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from baton.worker.runtime.processors import aggregate, base, custom, joins, stateless, table
from baton.worker.runtime.processors.base import Build, Factory, ProcessorNode
from baton.worker.runtime.processors.table import ToStreamProcessor, value_getter
from baton.worker.runtime.punctuation import NO_TIME, Punctuations
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import TaskStore
from baton.worker.topology.context import RecordContext, Send, SinkGate
from baton.worker.topology.graph import AggregateNode, Node, SourceNode, takes_changes


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
