"""The processor families' factory tables: every node a task's tree can hold has one factory.

``build_tree`` is a lookup by the node's exact type, so a node class without an entry (a new
node, or a subclass such as ``MergeNode``) would fail only when a topology first uses it.
"""

from __future__ import annotations

import pytest

from baton.worker.runtime.tree import FACTORIES
from baton.worker.topology import graph

pytestmark = pytest.mark.unit

# the nodes no task's tree holds: a global table is restored whole beside the tasks
# (runtime/global_tables.py), and a join reads its store
OUTSIDE_TASKS = {graph.GlobalTableNode}


def _node_types() -> set[type[graph.Node]]:
    found: set[type[graph.Node]] = set()
    todo = [graph.Node]
    while todo:
        for sub in todo.pop().__subclasses__():
            if sub.__module__ == graph.__name__ and sub not in found:
                found.add(sub)
                todo.append(sub)
    return found


def test_every_node_type_has_a_factory() -> None:
    assert set(FACTORIES) == _node_types() - OUTSIDE_TASKS
