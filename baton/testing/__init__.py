"""Helpers to test topologies: in-process with no broker (``TopologyTestDriver``), or against a real one.

``driver.py`` runs a topology's worker tasks in the test's own process, record by record,
in milliseconds: the first thing to reach for. ``broker.py`` runs real workers (``baton
run`` subprocesses) against a real broker, for end-to-end tests and benchmarks; Baton's
own integration tests use it.
"""

from baton.testing.broker import (
    Record,
    SteadyInput,
    WorkerProcess,
    end_offsets,
    group_committed,
    latest_by_key,
    produce,
    read_all,
    wait_for,
)
from baton.testing.driver import DeadLetter, TopologyTestDriver
from baton.testing.topics import TestInputTopic, TestOutputTopic, TestRecord

__all__ = [
    "DeadLetter",
    "Record",
    "SteadyInput",
    "TestInputTopic",
    "TestOutputTopic",
    "TestRecord",
    "TopologyTestDriver",
    "WorkerProcess",
    "end_offsets",
    "group_committed",
    "latest_by_key",
    "produce",
    "read_all",
    "wait_for",
]
