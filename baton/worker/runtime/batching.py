"""How many records the processing loop takes from the consumer per round.

Between two rounds the loop follows the control topic (flip prepares and drains),
commits when the commit interval is up, activates restored tasks and heartbeats the
liveness probe. A fixed batch of 1,000 records is ~20 ms for a cheap topology, but
10 s for one that spends 10 ms per record (a remote call, a model), and that would
make every flip, commit and probe wait 10 s. So the batch adapts, like Kafka Streams'
StreamThread adapts its process iterations to the commit interval: it halves when a
round ran over its time budget and doubles back when rounds are well within it.
"""

from __future__ import annotations

MAX_BATCH = 1000
MIN_BATCH = 1
ROUND_BUDGET_SECONDS = 0.1


class BatchSizer:
    """The next batch size, from how long the last full batch took to process."""

    def __init__(self, budget_s: float = ROUND_BUDGET_SECONDS, maximum: int = MAX_BATCH) -> None:
        self.budget_s = budget_s
        self.maximum = maximum
        self.size = maximum

    def observe(self, records: int, seconds: float) -> int:
        """Record one round; returns the size for the next one.

        A round that ran over budget halves the size (however few records it had: one
        slow record is reason enough). Only a *full* round that used under half the budget
        grows it, since a short round says nothing about the cost of a full one.
        """
        if seconds > self.budget_s:
            self.size = max(MIN_BATCH, min(self.size, records) // 2 or MIN_BATCH)
        elif records >= self.size and seconds < self.budget_s / 2:
            self.size = min(self.maximum, self.size * 2)
        return self.size
