"""Which topologies a blue-green flip can splice exactly, and why the others cannot.

A flip splits each input partition's offsets at a cut: the old active emits the outputs of
the records below it, the new active those from it on. That is exact only if each color's
output for a record is the same function of that partition's records up to it, whatever
else either color did. Three shapes break it, and a worker of such a topology refuses every
flip (its report carries the reason, the coordinator aborts, the operator abandons the
deploy with the reason in ``status``) instead of flipping inexactly:

* a **repartition** step: records reach the aggregation through an internal topic of each
  color, in an order that differs between the colors;
* a **stream-table join**: each color restores and tails the table topic on its own
  schedule, so the same stream record can meet different table versions in blue and green;
* an **aggregation over several source topics** (one ``stream`` of several, or a
  ``merge``): the task merges them per poll (smallest timestamp first within what each
  poll fetched), which differs between the colors, and so do the running aggregates.

Stateless steps over several topics (filter, map, merge, to) are fine: each output depends
on its own record only. docs/concepts.md says the same for users.
"""

from __future__ import annotations

from baton.worker.topology.graph import BuiltTopology


def flip_refusal(topology: BuiltTopology) -> str:
    """Why flips of ``topology`` cannot be exact (empty: they can)."""
    if topology.repartition_topics:
        return (
            "its topology repartitions (group_by/selectKey before an aggregation): records reach the "
            "aggregation through each color's own repartition topic, in different orders"
        )
    if topology.global_tables:
        names = ", ".join(t.store.source_topic or t.name for t in topology.global_tables)
        return (
            f"its topology joins a stream with a global table ({names}): each color reads the table on "
            "its own schedule, so the same record can meet different table versions in blue and green"
        )
    for sub in topology.subtopologies:
        if sub.tables:
            names = ", ".join(t.store.source_topic or t.name for t in sub.tables)
            return (
                f"its topology joins a stream with a table ({names}): each color reads the table on its own "
                "schedule, so the same record can meet different table versions in blue and green"
            )
        external = sorted({t for s in sub.sources if not s.internal for t in s.topics})
        if sub.stores and len(external) > 1:
            return (
                f"its topology aggregates records of several topics ({', '.join(external)}) in one task: "
                "they are merged in an order that depends on what each poll fetched, which differs between blue and green"
            )
    return ""
