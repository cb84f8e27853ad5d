"""The click counter whose user code can be made to stall, for ``bench/failover.py --fault stall``.

When the file ``STALL_FLAG`` exists, the next record's ``peek`` removes it, logs
``STALLING``, sleeps ``STALL_SECONDS`` (the GIL released, as a slow network call would) and
logs ``STALL_OVER``. Outputs are the click counter's (``examples/click_counter.py``); only
the timing differs. ``tests/integration/test_membership_stalled_thread.py`` runs it too.
"""

import logging
import os
import time

from pydantic import BaseModel, ConfigDict

from baton import JSON, STR, Json, Topology

STALLING = "bench: user code stalls"
STALL_OVER = "bench: user code stall over"

log = logging.getLogger("bench.stalling_click_counter")


class Click(BaseModel):
    model_config = ConfigDict(strict=True)
    user_id: str
    timestamp: int


def _maybe_stall(_key: object, _value: object) -> None:
    flag = os.environ["STALL_FLAG"]
    if os.path.exists(flag):
        os.remove(flag)
        seconds = float(os.environ["STALL_SECONDS"])
        log.warning(STALLING, extra={"seconds": seconds})
        time.sleep(seconds)
        log.warning(STALL_OVER)


topology = Topology()
(
    topology.stream(os.environ["CLICKS_TOPIC"], key=STR, value=Json(Click))
    .peek(_maybe_stall)
    .group_by_key()
    .count(store="user-counts-store")
    .to_stream()
    .to(os.environ["COUNTS_TOPIC"], value=JSON)
)
