"""Count clicks per user after a lookup that waits on I/O for every click.

Like ``click_counter``, but each record first waits ``LOOKUP_WAIT_MS`` milliseconds (default
0.6), standing in for a call to a remote service whose answer the count does not use. A
worker then spends most of its time waiting, not computing: one processing loop serves about
1,000 / LOOKUP_WAIT_MS records/s whatever the CPU, so more Pods are what more input needs.
``bench/autoscale.py`` and tests/e2e/test_autoscale_node.py run it under ``spec.autoscaling``.

Run it: baton run examples/lookup_counter.py --bootstrap-servers localhost:9092 --application-id lookups
(CLICKS_TOPIC / COUNTS_TOPIC rename the topics.)
"""

import os
import time
from typing import Any

from baton import JSON, STR, Topology

WAIT_S = float(os.environ.get("LOOKUP_WAIT_MS", "0.6")) / 1000


def lookup(key: Any, value: Any) -> None:
    """The remote call: it blocks the processing loop for ``WAIT_S``, as a synchronous client would."""
    if WAIT_S > 0:
        time.sleep(WAIT_S)


topology = Topology()
(
    topology.stream(os.environ.get("CLICKS_TOPIC", "clicks"), key=STR, value=JSON)
    .peek(lookup)
    .group_by_key()
    .count(store="user-counts-store")
    .to_stream()
    .to(os.environ.get("COUNTS_TOPIC", "user_counts"), value=JSON)
)
