"""The click counter on Faust (faust-streaming), as bench/peers/CONTRACT.md describes it.

Run with the Faust venv's python (bench/peers/venvs.py): ``python faust_app.py worker -l warn --without-web``.
The count lives in a Table with the ``rocksdb://`` store (the rocksdict driver) and its changelog topic; the
app id is the consumer group id.
"""

import os

import faust

app = faust.App(
    os.environ["BENCH_APP_ID"],
    broker=f"kafka://{os.environ['BENCH_BOOTSTRAP']}",
    store="rocksdb://",  # with only rocksdict installed, Faust's RocksDB store uses rocksdict
    datadir=os.environ["BENCH_STATE_DIR"],
    processing_guarantee=os.environ["BENCH_GUARANTEE"],
    broker_commit_interval=int(os.environ["BENCH_COMMIT_INTERVAL_MS"]) / 1000,
    consumer_auto_offset_reset="earliest",
    topic_partitions=8,
    web_enabled=False,
)
clicks = app.topic(os.environ["BENCH_INPUT"], key_type=str, value_serializer="json")
output = app.topic(os.environ["BENCH_OUTPUT"], key_type=str, value_serializer="json")
counts = app.Table("counts", default=int, partitions=8)


@app.agent(clicks)  # type: ignore[untyped-decorator]
async def count(stream: faust.Stream) -> None:
    async for user, _click in stream.items():
        counts[user] += 1
        await output.send(key=user, value=counts[user])


if __name__ == "__main__":
    app.main()
