"""Baton: stateful stream applications on Kafka in Python, run on Kubernetes.

This is the public API: what a topology module imports. Everything else under ``baton``
is internal and may change between releases; ``baton.testing`` holds helpers for users'
own tests against a real broker.
"""

from baton.worker.topology.custom import Processor, ProcessorContext, PunctuationType, StateStore
from baton.worker.topology.dsl import (
    Branched,
    BranchedStream,
    GroupedStream,
    Stream,
    Suppressed,
    Table,
    Topology,
    TopologyError,
    until_window_closes,
)
from baton.worker.topology.serdes import BYTES, JSON, LONG, STR, Json, JsonSerde, Serde, SerdeError
from baton.worker.topology.windows import (
    JoinWindows,
    SessionWindows,
    SlidingWindows,
    TimeWindows,
    Windowed,
    hopping,
    sessions,
    sliding,
    tumbling,
    within,
)

__version__ = "0.1.0"

__all__ = [
    "BYTES",
    "JSON",
    "LONG",
    "STR",
    "Branched",
    "BranchedStream",
    "GroupedStream",
    "JoinWindows",
    "Json",
    "JsonSerde",
    "Processor",
    "ProcessorContext",
    "PunctuationType",
    "Serde",
    "SerdeError",
    "SessionWindows",
    "SlidingWindows",
    "StateStore",
    "Stream",
    "Suppressed",
    "Table",
    "TimeWindows",
    "Topology",
    "TopologyError",
    "Windowed",
    "__version__",
    "hopping",
    "sessions",
    "sliding",
    "tumbling",
    "until_window_closes",
    "within",
]
