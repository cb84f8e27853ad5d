"""The click counter on Quix Streams, as bench/peers/CONTRACT.md describes it.

Run with the Quix venv's python (bench/peers/venvs.py): ``python quix_app.py``. The count
lives in Quix's default state, RocksDB with a changelog topic; state is per message key.
"""

import os

from quixstreams import Application, State

app = Application(
    broker_address=os.environ["BENCH_BOOTSTRAP"],
    consumer_group=os.environ["BENCH_APP_ID"],
    auto_offset_reset="earliest",
    state_dir=os.environ["BENCH_STATE_DIR"],
    processing_guarantee="exactly-once"
    if os.environ["BENCH_GUARANTEE"] == "exactly_once"
    else "at-least-once",
    commit_interval=int(os.environ["BENCH_COMMIT_INTERVAL_MS"]) / 1000,
    loglevel="WARNING",
)
clicks = app.topic(os.environ["BENCH_INPUT"], key_deserializer="str", value_deserializer="json")
counts = app.topic(os.environ["BENCH_OUTPUT"], key_serializer="str", value_serializer="json")


def count(_click: dict[str, object], state: State) -> int:
    n: int = state.get("count", 0) + 1
    state.set("count", n)
    return n


app.dataframe(clicks).apply(count, stateful=True).to_topic(counts)

if __name__ == "__main__":
    app.run()
