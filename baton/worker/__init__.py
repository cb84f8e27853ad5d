"""The Baton worker: the topology DSL users import, and the runtime that runs it in each pod."""

from baton.worker.dsl import GroupedStream, Stream, Table, Topology, TopologyError
from baton.worker.serdes import BYTES, JSON, LONG, STR, Json, JsonSerde, Serde, SerdeError
from baton.worker.windows import TimeWindows, Windowed, hopping, tumbling

__all__ = [
    "BYTES",
    "JSON",
    "LONG",
    "STR",
    "GroupedStream",
    "Json",
    "JsonSerde",
    "Serde",
    "SerdeError",
    "Stream",
    "Table",
    "TimeWindows",
    "Topology",
    "TopologyError",
    "Windowed",
    "hopping",
    "tumbling",
]
