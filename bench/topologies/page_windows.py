"""Clicks per page and minute, for ``bench/throughput.py --topology windowed``.

Bot clicks are dropped, the rest re-keyed by page (through the repartition topic
``<application.id>-clicks-by-page-repartition``) and counted in 1-minute tumbling windows
with a 10 s grace on the record timestamps; every count goes to ``COUNTS_TOPIC``, keyed by
the page and the window's start (Kafka Streams' windowed-key layout). The Kafka Streams peer
runs the same topology (bench/peers/kstreams/.../PageWindows.java).
"""

import os
from datetime import timedelta

from baton import JSON, STR, Topology, tumbling

topology = Topology()
(
    topology.stream(os.environ["CLICKS_TOPIC"], key=STR, value=JSON)
    .filter(lambda _user, click: not click["bot"])
    .group_by(lambda _user, click: click["page"], key=STR, name="clicks-by-page")
    .windowed_by(tumbling(timedelta(minutes=1), grace=timedelta(seconds=10)))
    .count(store="page-counts")
    .to_stream()
    .to(os.environ["COUNTS_TOPIC"], value=JSON)
)
