"""JSON value bytes this process wrote to its repartition topics: a count reading them back needs no parse.

``group_by(...).count()`` (windowed or not) decoded each record's value twice: the input's,
and the repartition topic's, where a count only needs to know that the value is there and
is JSON (a value that is not goes to the dead-letter topic). When the task reading a
repartition partition runs in the process that wrote it (one process does both, or its
share of the partitions), the bytes it reads back are bytes written here: parsed on the way
in (forwarded as they arrived, ``serdes.decodes_alike``) or made by orjson, valid JSON either
way, so a set membership (a hash) stands for the parse and the dict it builds. A record
this set does not hold (another process wrote it, the set was emptied, or something else
wrote the topic) is parsed as before. Only the processing thread touches it.
"""

from __future__ import annotations

# value bytes of the repartition records sent since the set was last emptied
SENT: set[bytes] = set()
# records in flight between a send and its read-back in the same process are a few
# thousand; past this the set starts over, and the reads it forgot parse again
LIMIT = 32_768


def make_room() -> set[bytes]:
    """The set, emptied first when full: called once per run, not per record."""
    if len(SENT) > LIMIT:
        SENT.clear()
    return SENT
