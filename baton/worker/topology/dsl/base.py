"""What every object of the DSL shares: the error a topology raises, and the handle that a
stream, a table and their grouped forms hold."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from baton.worker.topology.dsl.builder import Topology
    from baton.worker.topology.graph import Node
    from baton.worker.topology.serdes import Serde

Joiner = Callable[[Any, Any], Any]  # (this side's value, the other's) -> the joined value


class TopologyError(ValueError):
    """The topology cannot run as written (the message says why)."""


class Handle:
    """What a stream, a table and their grouped forms hold: the topology, the node the next
    operation hangs below, and the serdes that flow along (written once for all four)."""

    def __init__(self, topology: Topology, node: Node, key: Serde[Any], value: Serde[Any]) -> None:
        self._topology = topology
        self._node = node
        self.key_serde = key
        self.value_serde = value
