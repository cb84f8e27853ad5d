"""Throughput of the click counter: 1,000,000 events, one worker process, both guarantees,
against the plain-Python ceilings measured in the same run; or of two other topologies
against Kafka Streams.

    python bench/throughput.py --bootstrap 127.0.0.1:9092 [--events 1000000] [--json bench/throughput.json]
    python bench/throughput.py --processes 1,2     # also one pod of two worker processes (--processes 2)
    python bench/throughput.py --processes 1,2 --repeat 3   # three rounds; each row is the median
    python bench/throughput.py --topology windowed --events 1000000 --repeat 3   # against Kafka Streams
    python bench/throughput.py --topology join --events 1000000 --repeat 3

``--topology windowed`` (filter, re-key through a repartition topic, 1-minute tumbling windows
with a 10 s grace) and ``--topology join`` (a stream-table join) run Baton and Kafka Streams
4.3.1 on the same input in the same invocation, both guarantees, each output checked exact:
``bench/topologies/compare.py`` says how. What follows is the click counter's.

The clock runs from the first processed record to the last (scraped from the worker's
``baton_records_consumed_total`` every quarter second), so process start, group join and
topic creation are excluded; the end-to-end time is reported too. A pod of several
processes is scraped at each process's own endpoint, not at the pod's merged one: the
polling then costs each process what it costs one alone, and the supervisor nothing.

**The ceiling** is what one Python process does with the same input and no framework: a
confluent-kafka consumer loop that decodes each click (orjson), counts it in a dict and
produces the count (no store, no changelog, no transaction), on the same broker, the same
topic, in this same invocation, its consumer fetching as Baton's does. Baton's rows say
what fraction of it they reach: the price of state that survives the pod, restores,
standbys and exactly-once. A second row runs the same loop on librdkafka's fetch defaults,
whose 1 s backoff caps what a consumer reads (~120,000 small records/s here). A third, **the
1 s loop**, counts as the first but produces each changed user's latest count once a second
(and once after the last click) instead of a count per click: the output Baton's write cache
gives, without the cache's cost. Baton's rows say what fraction of it they reach too
(``of 1 s loop``).

``--alos-commit-ms`` sets the at-least-once commit interval (default: 30 s); a run ends only
once its group has committed every input offset, so a short run waits for that commit (the
tests use one second).

The ``cores`` column is how many cores were busy while the records were processed (all
of the machine's), ``broker`` how many of them the local stack's broker used: on a
two-core machine, what the worker processes did not get. ``app`` is the cores the run's
own processes used (a pod's supervisor and workers, or the plain loops), ``app µs/rec``
their CPU per record; records/s is the one divided by the other, so a two-process row
that falls short of twice one process says whether its processes got fewer cores or
spent more on each record.

With ``--processes 1,2`` the plain loop runs in two processes too, each reading half the
partitions, started together: what this machine, broker included, gives two independent
Python processes with no framework, beside Baton's two-process rows.

``--repeat N`` measures everything (the ceiling included) N times, in rounds, each round
in another order, and each row shows the median records/s with the range; the ratios are
those of the medians. This machine's speed drifts by a quarter from one minute to the next
(docs/benchmarks.md, "Side by side", on ``--repeat``), and a ratio of two single runs carries
that drift whole.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import orjson
from confluent_kafka import OFFSET_BEGINNING, Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from baton.testing import WorkerProcess, latest_by_key, read_all, wait_for
from baton.worker.runtime.clients import FETCH_DEFAULTS

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dev"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench.topologies, bench.peers

from batondev import kafka, procs
from batondev.standbys import load_user_clicks

from bench.topologies import compare
from bench.topologies.measure import POLL_S
from bench.topologies.measure import cores as _cores
from bench.topologies.measure import cpu_sample as _cpu_sample

PARTITIONS = 8
CEILING = "plain loop (ceiling)"
# the same loop with librdkafka's own fetch settings: what a consumer reads when it keeps the
# 1 s fetch backoff that Baton's consumer shortens (baton/worker/runtime/clients.py)
LIBRDKAFKA_FETCH = "plain loop, librdkafka fetch"
# the loop that produces each changed key's latest count once a second, not a record per click:
# the output of Baton's write cache
FLUSHED = "plain loop, 1 s flush"
FLUSH_S = 1.0
CEILINGS = {CEILING: FETCH_DEFAULTS, LIBRDKAFKA_FETCH: {}, FLUSHED: FETCH_DEFAULTS}
SPAWN_S = 5.0  # time for a spawned plain loop's start-up (imports, clients), before the loops start
EXAMPLE = str(Path(__file__).resolve().parents[1] / "examples" / "click_counter.py")


def run_one(
    bootstrap: str,
    source: str,
    guarantee: str,
    events: int,
    workdir: Path,
    *,
    processes: int = 1,
    round_: int = 1,
    alos_commit_ms: int | None = None,
) -> dict[str, float | str]:
    sink = f"{source}-counts-{guarantee}-{processes}-r{round_}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(sink, PARTITIONS, 1)])[sink].result(30)
    app = f"bench-{guarantee}-{uuid.uuid4().hex[:6]}"
    worker = WorkerProcess(
        EXAMPLE,
        bootstrap=bootstrap,
        application_id=app,
        state_dir=workdir / app,
        log_path=workdir / f"{app}.log",
        guarantee=guarantee,
        env={"CLICKS_TOPIC": source, "COUNTS_TOPIC": sink},
        processes=processes,
        extra_args=(
            ["--commit-interval-ms", str(alos_commit_ms)]
            if alos_commit_ms and guarantee == "at_least_once"
            else []
        ),
    )
    started = time.monotonic()
    worker.start()
    assert worker.proc is not None  # started: the pod's supervisor, or its one worker
    pod = worker.proc.pid
    first = last = 0.0
    cpu: dict[str, float] = {}  # CPU seconds of the broker, machine and pod at the first and last poll
    tree: list[int] = []  # the pod's processes
    broker = procs.running_pid(kafka.NAME)
    try:

        def progress() -> bool:
            nonlocal first, last
            done = worker.metric("baton_records_consumed_total", from_processes=True)
            now = time.monotonic()
            when = "last" if first else "first"
            if done > 0 and not first:
                first = now
            last = now
            if done > 0:
                tree[:] = tree or procs.process_tree(pod)  # all started by the first record
                cpu.update(_cpu_sample(when, broker, sum(procs.cpu_seconds(pid) for pid in tree)))
            return done >= events

        wait_for(f"{guarantee}: did not finish", progress, 600, every=POLL_S)
        # The counter also counts records processed again after a rebalance (work a revoked
        # or aborted owner did not commit), so it may reach ``events`` first: the worker runs
        # until the group has committed every input offset, or the exact check would judge
        # a stop, not the counts. (An at-least-once run commits every 30 s by default.)
        wait_for(f"{guarantee}: input not all committed", lambda: _all_committed(bootstrap, app, source), 120)
        # Read once every input offset is committed: a short run can consume all of its input
        # before its first commit has returned, and would show no time in commit at all.
        commit_seconds = worker.metric("baton_commit_latency_seconds_sum")
        committed = time.monotonic()
    finally:
        code = worker.stop(60)
    seconds = max(last - first, POLL_S)  # a run shorter than one poll is known only to that granularity
    return {
        "guarantee": guarantee,
        "processes": processes,
        "events": events,
        "seconds": round(seconds, 2),
        "records_per_second": round(events / seconds),
        "end_to_end_seconds": round(last - started, 2),
        # the processing threads' time spent committing (the cache flush, then waiting on the broker),
        # as a share of the run: where a second process's scaling goes under exactly-once
        "in_commit": round(commit_seconds / (processes * (committed - started)), 4),
        # cores in use while the records were processed: the whole machine, the broker's share of
        # them (what the worker processes did not get on this machine) and the pod's own
        **_cores(cpu, seconds, events),
        "exit_code": code,
        "sink": sink,
    }


def _all_committed(bootstrap: str, group: str, topic: str) -> bool:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    request = [ConsumerGroupTopicPartitions(group)]
    committed = admin.list_consumer_group_offsets(request)[group].result(30).topic_partitions or []
    offsets = {tp.partition: tp.offset for tp in committed if tp.topic == topic}
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{group}-watermarks"})
    try:
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), 10)[1] for p in range(PARTITIONS)}
    finally:
        consumer.close()
    return all(offsets.get(p, -1) >= end for p, end in ends.items())


def run_ceiling(
    bootstrap: str, source: str, events: int, round_: int = 1, name: str = CEILING, *, processes: int = 1
) -> dict[str, float | str]:
    """The plain loop: decode, count in a dict, produce the count. Same clock as Baton's rows.

    The ceiling's consumer fetches as Baton's does (``FETCH_DEFAULTS``); ``LIBRDKAFKA_FETCH``
    is the same loop on librdkafka's defaults, which cap what any consumer reads here.
    ``FLUSHED`` produces each changed key's latest count once a second instead of a count per
    click (and once more after the last click): the output of Baton's write cache.
    With ``processes`` > 1 the loop runs in that many processes, each reading its share of
    the partitions (a user's clicks are in one partition, so each counts its users whole):
    what this machine gives that many independent Python processes with no framework at
    all, the measure for Baton's ``--processes N`` rows.
    """
    suffix = f"-{processes}p" if processes > 1 else ""
    kind = {CEILING: "baton", LIBRDKAFKA_FETCH: "librdkafka", FLUSHED: "flushed"}[name]
    sink = f"{source}-counts-ceiling-{kind}{suffix}-r{round_}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(sink, PARTITIONS, 1)])[sink].result(30)
    broker = procs.running_pid(kafka.NAME)
    shares = [list(range(PARTITIONS))[i::processes] for i in range(processes)]
    started = time.monotonic()
    start_at = 0.0 if processes == 1 else started + SPAWN_S
    jobs = [_Share(bootstrap, source, sink, name, share, broker, start_at) for share in shares]
    if processes == 1:
        loops = [_plain_loop(jobs[0])]
    else:  # spawned, not forked: each starts with no librdkafka handle or thread of this one's
        with multiprocessing.get_context("spawn").Pool(processes) as pool:
            loops = pool.map(_plain_loop, jobs)
    done = sum(int(loop["done"]) for loop in loops)
    first = min(loops, key=lambda loop: loop["first"])
    last = max(loops, key=lambda loop: loop["last"])
    # a run shorter than one poll is known only to that granularity
    seconds = max(last["last"] - first["first"], POLL_S)
    cpu = {k: v for k, v in first.items() if k.endswith("_first")}
    cpu |= {k: v for k, v in last.items() if k.endswith("_last")}
    if cpu:  # each loop's own CPU over its own span, summed: the app's CPU
        cpu |= {"app_first": 0.0, "app_last": sum(loop["app_last"] - loop["app_first"] for loop in loops)}
    if done != events:
        sys.exit(f"{name}: read {done:,} clicks, not {events:,}")
    return {
        "guarantee": name,
        "processes": processes,
        "events": done,
        "seconds": round(seconds, 2),
        "records_per_second": round(done / seconds),
        "end_to_end_seconds": round(last["last"] - started, 2),
        "in_commit": 0.0,
        **_cores(cpu, seconds, done),
        "exit_code": 0,
        "sink": sink,
    }


@dataclass(frozen=True)
class _Share:
    """What one plain loop reads and writes (picklable: a spawned process gets it whole)."""

    bootstrap: str
    source: str
    sink: str
    name: str
    partitions: list[int]
    broker: int | None
    start_at: float  # CLOCK_MONOTONIC: the loops of one run start together, their start-ups done


def _plain_loop(share: _Share) -> dict[str, float]:
    """One plain loop over the share's partitions, from their start to their end offsets now.

    CLOCK_MONOTONIC is one clock for every process of the machine, so the loops' times
    compare; the machine's and the broker's CPU are sampled at the first record and the last.
    """
    bootstrap, source, sink, broker = share.bootstrap, share.source, share.sink, share.broker
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ceiling-{uuid.uuid4().hex[:6]}",  # never joins: the partitions are assigned
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **CEILINGS[share.name],
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 5,
            "enable.idempotence": True,
            "partitioner": "murmur2_random",
        }
    )
    events = sum(consumer.get_watermark_offsets(TopicPartition(source, p), 30)[1] for p in share.partitions)
    consumer.assign([TopicPartition(source, p, OFFSET_BEGINNING) for p in share.partitions])
    time.sleep(max(0.0, share.start_at - time.monotonic()))
    counts: dict[str, int] = {}
    dirty: dict[bytes | None, int] = {}  # the flushed loop's keys changed since its last flush
    flushed = share.name == FLUSHED
    done = 0
    first = last = next_flush = 0.0
    cpu: dict[str, float] = {}
    loads, dumps, produce_one = orjson.loads, orjson.dumps, producer.produce
    try:
        while done < events:
            batch = consumer.consume(1000, 0.5)
            if batch and not first:
                first = time.monotonic()
                next_flush = first + FLUSH_S
                cpu = _cpu_sample("first", broker, procs.cpu_seconds(os.getpid()))
            for msg in batch:  # count, and produce every count (the flushed loop: note the key's)
                value = msg.value()
                if msg.error() is not None or value is None:
                    continue
                user = loads(value)["user_id"]
                n = counts.get(user, 0) + 1
                counts[user] = n
                done += 1
                if flushed:
                    dirty[msg.key()] = n
                    continue
                while True:  # inline, not _produce: the ceiling's per-record path has no extra call
                    try:
                        produce_one(sink, dumps(n), msg.key())
                        break
                    except BufferError:  # the local queue is full: let deliveries drain it
                        producer.poll(0.05)
            if flushed and (done >= events or time.monotonic() >= next_flush):
                for key, n in dirty.items():  # each changed key's latest count, once a second
                    _produce(producer, sink, dumps(n), key)
                dirty.clear()
                next_flush += FLUSH_S
            producer.poll(0)
        producer.flush(60)
        last = time.monotonic()
        cpu |= _cpu_sample("last", broker, procs.cpu_seconds(os.getpid()))
    finally:
        consumer.close()
    return {"done": done, "first": first, "last": last, **cpu}


def _produce(producer: Producer, topic: str, value: bytes, key: bytes | None) -> None:
    while True:
        try:
            producer.produce(topic, value, key)
            return
        except BufferError:  # the local queue is full: let deliveries drain it
            producer.poll(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bootstrap", default=os.environ.get("BATON_KAFKA_BOOTSTRAP", "127.0.0.1:9092"))
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument(
        "--topology",
        choices=("clicks", "windowed", "join"),
        default="clicks",
        help="clicks: the click counter against the plain loops; windowed, join: against Kafka Streams",
    )
    parser.add_argument("--users", type=int, default=10_000)
    parser.add_argument("--pages", type=int, default=1_200, help="windowed and join: pages clicked")
    parser.add_argument(
        "--json", type=Path, help="default: bench/throughput.json, bench/throughput-<topology>.json"
    )
    parser.add_argument(
        "--processes",
        default="1",
        help="the click counter: comma-separated worker process counts to run (baton run --processes N), e.g. 1,2",
    )
    parser.add_argument("--guarantees", default="at_least_once,exactly_once_v2")
    parser.add_argument("--systems", default="baton,kstreams", help="windowed and join: baton, kstreams")
    parser.add_argument(
        "--alos-commit-ms",
        type=int,
        help="the at-least-once commit interval (every system's); default: their own, 30 s",
    )
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every run; each row is the median")
    args = parser.parse_args()
    if args.json is None:
        suffix = "" if args.topology == "clicks" else f"-{args.topology}"
        args.json = Path(__file__).resolve().parent / f"throughput{suffix}.json"
    if args.topology != "clicks":
        if args.processes != "1":
            sys.exit("--processes is the click counter's; windowed and join run one process a system")
        compare.main(args)
        return
    process_counts = [int(n) for n in args.processes.split(",")]
    source = f"bench-clicks-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": args.bootstrap})
    admin.create_topics([NewTopic(source, PARTITIONS, 1)])[source].result(30)
    t0 = time.monotonic()
    expected = load_user_clicks(args.bootstrap, source, args.events, args.users)
    print(f"produced {args.events:,} events in {time.monotonic() - t0:.1f}s")
    runs: list[tuple[str, int]] = [(CEILING, 1), (LIBRDKAFKA_FETCH, 1), (FLUSHED, 1)]
    runs += [(CEILING, n) for n in process_counts if n > 1]
    runs += [(g, n) for g in args.guarantees.split(",") for n in process_counts]
    results: list[dict[str, float | str]] = []
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(1, args.repeat + 1):
            shift = (round_ - 1) % len(runs)
            for guarantee, processes in runs[shift:] + runs[:shift]:
                if guarantee in CEILINGS:
                    r = run_ceiling(
                        args.bootstrap, source, args.events, round_, guarantee, processes=processes
                    )
                else:
                    r = run_one(
                        args.bootstrap,
                        source,
                        guarantee,
                        args.events,
                        Path(tmp),
                        processes=processes,
                        round_=round_,
                        alos_commit_ms=args.alos_commit_ms,
                    )
                r["round"] = round_
                results.append(r)
    for r in results:  # every run must have counted every click: a fast wrong answer is no answer
        finals = latest_by_key(read_all(args.bootstrap, str(r["sink"]), timeout=300))
        got = {k: int(v) for k, v in finals.items() if k is not None and v is not None}
        r["exact"] = got == expected
    rows = summarize(results, runs)
    print(
        f"{'run':<30}{'procs':>6}{'events':>10}{'seconds':>10}{'records/s':>12}{'of ceiling':>12}"
        f"{'of 1 s loop':>12}{'of 1 proc':>11}{'end-to-end s':>14}{'in commit':>11}{'cores':>7}{'broker':>8}{'app':>6}"
        f"{'app µs/rec':>12}{'exact':>8}" + (f"  {'runs (range)':<20}" if args.repeat > 1 else "")
    )
    for r in rows:
        print(
            f"{r['guarantee']:<30}{r['processes']:>6}{r['events']:>10,}{r['seconds']:>10}"
            f"{r['records_per_second']:>12,}{r['of_ceiling']:>12}{r['of_flushed']:>12}{r['of_one_process']:>11}"
            f"{r['end_to_end_seconds']:>14}{r['in_commit']:>11.1%}{r.get('busy_cores', '-'):>7}"
            f"{r.get('broker_cores', '-'):>8}{r.get('app_cores', '-'):>6}{r.get('app_us_per_record', '-'):>12}"
            f"{'yes' if r['exact'] else 'NO':>8}"
            + (
                f"  {r['runs']} ({r['min_records_per_second']:,}-{r['max_records_per_second']:,})"
                if args.repeat > 1
                else ""
            )
        )
    for r in rows:
        if r["guarantee"] not in CEILINGS and r["processes"] == 1:
            print(f"{r['guarantee']}: {r['of_flushed']}x the plain loop that flushes once a second")
    args.json.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "topology": "clicks",
        "cpus": os.cpu_count(),
        "repeat": args.repeat,
        "at_least_once_commit_ms": args.alos_commit_ms,
        "results": rows,
    }
    if args.repeat > 1:
        report["runs"] = results
    args.json.write_text(orjson.dumps(report, option=orjson.OPT_INDENT_2).decode())
    if not all(r["exact"] and r["exit_code"] == 0 for r in results):
        sys.exit("a run did not count every click exactly (see the table)")


def summarize(
    results: list[dict[str, float | str]], runs: list[tuple[str, int]]
) -> list[dict[str, float | str]]:
    """One row per (guarantee, processes): its median run, and the ratios of the medians.

    The median run is the lower middle one for an even count, so every number in a row
    comes from one real run. A row is exact only if every one of its runs was.
    """
    rows: list[dict[str, float | str]] = []
    for guarantee, processes in runs:
        mine = [r for r in results if r["guarantee"] == guarantee and r["processes"] == processes]
        ordered = sorted(mine, key=lambda r: float(r["records_per_second"]))
        rates = [int(r["records_per_second"]) for r in ordered]
        row = {k: v for k, v in ordered[(len(ordered) - 1) // 2].items() if k != "round"}
        row |= {
            "runs": len(mine),
            "min_records_per_second": rates[0],
            "max_records_per_second": rates[-1],
            "exact": all(r["exact"] for r in mine),
            "exit_code": max(int(r["exit_code"]) for r in mine),
        }
        rows.append(row)
    ceiling = next(
        float(r["records_per_second"]) for r in rows if r["guarantee"] == CEILING and r["processes"] == 1
    )
    flushed = next(
        float(r["records_per_second"]) for r in rows if r["guarantee"] == FLUSHED and r["processes"] == 1
    )
    single = {str(r["guarantee"]): float(r["records_per_second"]) for r in rows if r["processes"] == 1}
    for r in rows:
        r["of_ceiling"] = round(float(r["records_per_second"]) / ceiling, 2)
        r["of_flushed"] = round(float(r["records_per_second"]) / flushed, 2)
        r["of_one_process"] = round(float(r["records_per_second"]) / single[str(r["guarantee"])], 2)
    return rows


if __name__ == "__main__":
    main()
