"""Count clicks per user: `clicks` (key user id, JSON click) -> `user_counts` (key user id, JSON count).

Run it: baton run examples/click_counter.py --bootstrap-servers localhost:9092 --application-id click-counter
(CLICKS_TOPIC / COUNTS_TOPIC rename the topics, e.g. in tests.)
"""

import os

from pydantic import BaseModel, ConfigDict

from baton import JSON, STR, Json, Topology


class Click(BaseModel):
    model_config = ConfigDict(strict=True)  # "alice" as a timestamp is bad input: it goes to the DLQ
    user_id: str
    timestamp: int


topology = Topology()
(
    topology.stream(os.environ.get("CLICKS_TOPIC", "clicks"), key=STR, value=Json(Click))
    .group_by_key()
    .count(store="user-counts-store")
    .to_stream()
    .to(os.environ.get("COUNTS_TOPIC", "user_counts"), value=JSON)
)
