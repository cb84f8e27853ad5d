"""Reading a counter's output back: every count per key, in order, and the exactly-once check on it."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from baton.testing import read_all


def count_sequences(bootstrap: str, sink: str) -> dict[str, list[int]]:
    """Each key's counts as the sink holds them (read_committed), in offset order."""
    seq: dict[str, list[int]] = {}
    for r in read_all(bootstrap, sink):
        assert r.key is not None and r.value is not None
        seq.setdefault(r.key.decode(), []).append(int(r.value))
    return seq


def sequences_if_exact(bootstrap: str, sink: str, sent: Mapping[str, int]) -> dict[str, list[int]] | None:
    """Each key's counts, once every key's last count is the number of its records sent; else None."""
    seq = count_sequences(bootstrap, sink)
    return seq if {k: v[-1] for k, v in seq.items()} == dict(sent) else None


def assert_strictly_increasing(sequences: dict[str, list[int]]) -> None:
    """Exactly-once: no count ever repeats or goes backwards (sorted-ness would accept duplicates)."""
    for key, counts in sequences.items():
        assert all(a < b for a, b in itertools.pairwise(counts)), (
            f"{key} repeated or went backwards: {counts}"
        )
