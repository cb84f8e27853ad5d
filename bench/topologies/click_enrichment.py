"""Clicks enriched from a table of users, for ``bench/throughput.py --topology join``.

A stream-table inner join on the user id (both topics keyed by user, co-partitioned): each
click gains its user's country and tier and goes to ``ENRICHED_TOPIC``; a click of a user the
table lacks is dropped. The Kafka Streams peer runs the same topology
(bench/peers/kstreams/.../ClickEnrichment.java).
"""

import os
from typing import Any

from baton import JSON, STR, Topology


def enrich(click: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
    click["country"] = user["country"]  # deserialized for this record alone: changed in place
    click["tier"] = user["tier"]
    return click


topology = Topology()
users = topology.table(os.environ["USERS_TOPIC"], key=STR, value=JSON)
topology.stream(os.environ["CLICKS_TOPIC"], key=STR, value=JSON).join(users, enrich).to(
    os.environ["ENRICHED_TOPIC"]
)
