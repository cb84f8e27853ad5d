"""The click counter for Baton, as bench/peers/CONTRACT.md describes it.

The same topology as examples/click_counter.py, with the plain JSON serde the other peers
use instead of the example's validating pydantic model. ``run.py`` starts it with
``baton run bench/peers/baton_app.py`` and the contract's settings as command-line options.
"""

import os

from baton import JSON, STR, Topology

topology = Topology()
(
    topology.stream(os.environ["BENCH_INPUT"], key=STR, value=JSON)
    .group_by_key()
    .count(store="counts")
    .to_stream()
    .to(os.environ["BENCH_OUTPUT"], value=JSON)
)
