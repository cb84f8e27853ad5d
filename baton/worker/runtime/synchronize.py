"""The order in which a task with several input partitions takes one poll's records.

Kafka Streams gives a task with several inputs (a join, a merge, a processed table) the
record with the smallest timestamp among its inputs' heads next, so that stream time, and
with it which records are late and when windows close, follows event time rather than
which topic the consumer happened to fetch first. Baton does the same within each poll's
batch: ``consume()`` returns runs of one partition's records, and this module cuts a
task's runs into slices, each taken while its records are no later than every other
input's next record. Records of one partition keep their offset order.

The timestamp compared is the Kafka record's (a timestamp extractor runs only when the
record is deserialized, inside the task). Records of a later poll are not waited for:
an input with nothing in this batch does not hold the others back (Kafka Streams'
``max.task.idle.ms`` = 0 when nothing is fetched for that input; waiting up to a
positive idle time is not implemented).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Sequence


def synchronized(
    inputs: Sequence[Sequence[tuple[int, int]]], timestamp: Callable[[int], int]
) -> Iterator[tuple[int, int]]:
    """Slices ``(start, stop)`` of the batch in processing order.

    ``inputs`` holds, per input partition, its runs (``start``, ``stop`` indices into the
    batch) in batch order; ``timestamp(i)`` is record ``i``'s. Each slice is taken from the
    input whose next record has the smallest timestamp (ties: the input listed first) and
    goes on while its records are no later than the other inputs' next records.
    """
    queues = [deque(runs) for runs in inputs if runs]
    while queues:
        if len(queues) == 1:
            yield from queues[0]
            return
        heads = [(timestamp(q[0][0]), n) for n, q in enumerate(queues)]
        _, best = min(heads)
        bound = min(ts for ts, n in heads if n != best)
        start, stop = queues[best][0]
        end = start + 1
        while end < stop and timestamp(end) <= bound:
            end += 1
        yield start, end
        if end < stop:
            queues[best][0] = (end, stop)
            continue
        queues[best].popleft()
        if not queues[best]:
            del queues[best]
