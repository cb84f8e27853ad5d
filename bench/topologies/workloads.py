"""The input of bench/throughput.py's ``windowed`` and ``join`` topologies, and what each must output.

One input serves both: ``events`` clicks over 12 partitions, keyed by user, the value
``{"user_id", "page", "bot", "n"}`` (``n``: the click's number, from 0), and for the join a
table of users (``{"user_id", "country", "tier"}``, 12 partitions, keyed alike). Seeded, so
every invocation with the same sizes produces the same records.

**Record time.** The clicks' Kafka timestamps rise with ``n`` over ``SPAN_MS`` (10 minutes,
whatever the number of clicks), from two hours before the invocation rounded down to a minute,
so they are never older than the broker's retention. The users' rows are a minute older than
the first click, so Kafka Streams, which processes a task's records in timestamp order,
has read the whole table before the first click, as Baton (which loads a joined table before
the task runs) has.

**Why each page's clicks come from one input partition.** A window is closed by *stream time*:
the largest timestamp its task has seen. After the re-key, one repartition partition receives
records from every input partition that clicks its pages, interleaved in whatever order the
system happens to process the input partitions; one partition processed 20 s ahead of another
in record time makes the other's records late (10 s grace), and which ones are dropped would
depend on the run. So each user clicks only pages whose partition (murmur2, the Java client's
partitioner, which both systems' repartition topics use) is the user's own: a repartition
partition is then fed by one input partition, in offset order, timestamps never going back,
and no record is late in any run. Both systems still write every kept click to the
repartition topic and read it back; the final count of each (page, window) is a function of
the input alone, and is checked.
"""

from __future__ import annotations

import random
import struct
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic
from kafka.partitioner.default import murmur2

from baton.testing import Record, produce, read_all

PARTITIONS = 12
SPAN_MS = 10 * 60_000  # the clicks' record time, first to last
WINDOW_MS = 60_000  # the windowed topology's tumbling window (its grace is 10 s)
BOT_SHARE = 0.1  # clicks the windowed topology filters out
ABSENT_EVERY = 20  # every 20th user has no row in the users table: the inner join drops its clicks
COUNTRIES = ("de", "fr", "nl", "pl", "es", "it", "se", "us", "br", "jp", "in", "ng")
_START = struct.Struct(">q")


def partition_of(key: bytes, partitions: int = PARTITIONS) -> int:
    """The partition the Java client's default partitioner (and Baton's producers) pick for ``key``."""
    return int((murmur2(key) & 0x7FFFFFFF) % partitions)


@dataclass
class Input:
    """The topics one invocation produced, and what they must give."""

    clicks: str
    users: str  # the users table ("" unless the join needs it)
    events: int
    kept: int  # clicks that are not a bot's: what the windowed topology repartitions
    table_rows: int
    windows: Counter[tuple[str, int]]  # kept clicks per (page, window start)
    user_of: list[str]  # the user of click n
    profiles: dict[str, tuple[str, str]] = field(
        default_factory=dict
    )  # (country, tier) per user in the table

    def joined(self) -> int:
        """Clicks whose user is in the table: the join's output records."""
        return sum(1 for user in self.user_of if user in self.profiles)

    def targets(self, topology: str) -> dict[str, int]:
        """Per system: its processed-records counter once every record went through the topology.

        Baton counts each record its tasks processed (a repartition topic's too); a table it
        only looks up is loaded beside the task, not processed. Kafka Streams' ``process-total``
        counts every record its tasks processed, the table's rows included.
        """
        if topology == "windowed":
            both = self.events + self.kept
            return {"baton": both, "kstreams": both}
        return {"baton": self.events, "kstreams": self.events + self.table_rows}


def make_input(
    bootstrap: str, admin: AdminClient, topology: str, *, events: int, users: int, pages: int, seed: int = 50
) -> Input:
    """Create and fill the topics; the clicks' and, for the join, the users table's."""
    prefix = f"bench-{topology}-{uuid.uuid4().hex[:6]}"
    clicks = f"{prefix}-clicks"
    table = f"{prefix}-users" if topology == "join" else ""
    for topic in filter(None, (clicks, table)):
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
    rng = random.Random(seed)
    names = [f"user-{i}" for i in range(users)]
    home = [partition_of(name.encode()) for name in names]
    by_partition = _pages(pages)
    base = (int(time.time() * 1000) - 2 * 3600_000) // WINDOW_MS * WINDOW_MS
    profiles = {
        name: (COUNTRIES[i % len(COUNTRIES)], "pro" if i % 7 == 0 else "free")
        for i, name in enumerate(names)
        if i % ABSENT_EVERY != ABSENT_EVERY - 1
    }
    if table:
        produce(
            bootstrap,
            table,
            (
                (name.encode(), orjson.dumps({"user_id": name, "country": c, "tier": t}), base - WINDOW_MS)
                for name, (c, t) in profiles.items()
            ),
        )
    windows: Counter[tuple[str, int]] = Counter()
    user_of: list[str] = []

    def records() -> Iterator[tuple[bytes, bytes, int]]:
        for n in range(events):
            i = rng.randrange(users)
            user = names[i]
            page = rng.choice(by_partition[home[i]])
            bot = rng.random() < BOT_SHARE
            ts = base + n * SPAN_MS // events
            if not bot:
                windows[(page, ts - ts % WINDOW_MS)] += 1
            user_of.append(user)
            yield user.encode(), orjson.dumps({"user_id": user, "page": page, "bot": bot, "n": n}), ts

    produce(bootstrap, clicks, records())
    return Input(
        clicks=clicks,
        users=table,
        events=events,
        kept=sum(windows.values()),
        table_rows=len(profiles) if table else 0,
        windows=windows,
        user_of=user_of,
        profiles=profiles if table else {},
    )


def _pages(pages: int) -> list[list[str]]:
    """``pages`` page names, as many on each partition (at least one each), by the partitioner."""
    each = max(1, pages // PARTITIONS)
    out: list[list[str]] = [[] for _ in range(PARTITIONS)]
    j = 0
    while any(len(names) < each for names in out):
        name = f"page-{j}"
        names = out[partition_of(name.encode())]
        if len(names) < each:
            names.append(name)
        j += 1
    return out


READ_TIMEOUT_S = 600.0  # reading a run's output back: a join's is a record per joined click


def check(bootstrap: str, topology: str, data: Input, output: str) -> tuple[list[str], int]:
    """What is wrong with a run's output (empty when exact, else the count and a few examples),
    and how many records it holds. The output is read to its end, committed records only
    (read_committed, as a downstream consumer of an exactly-once run reads it)."""
    records = read_all(bootstrap, output, timeout=READ_TIMEOUT_S)
    check_output = _check_windows if topology == "windowed" else _check_join
    return check_output(data, records), len(records)


def _check_windows(data: Input, records: list[Record]) -> list[str]:
    """The latest count of every (page, window) must be its number of kept clicks."""
    latest = {r.key or b"": r.value for r in records}  # in offset order per partition: the last wins
    got: dict[tuple[str, int], int | None] = {}
    wrong: list[str] = []
    for key, value in latest.items():
        if len(key) <= _START.size:
            wrong.append(f"key {key!r}: not a page and a window start")
            continue
        window = (key[: -_START.size].decode(), _START.unpack(key[-_START.size :])[0])
        got[window] = None if value is None else int(value)
    wrong += [f"{w}: {got.get(w)} != {n}" for w, n in sorted(data.windows.items()) if got.get(w) != n]
    wrong += [f"{w}: {got[w]}, a window without clicks" for w in sorted(got.keys() - data.windows.keys())]
    return [f"{len(wrong)} wrong windows", *wrong[:5]] if wrong else []


def _check_join(data: Input, records: list[Record]) -> list[str]:
    """Every click of a user in the table exactly once, keyed by its user, with the user's
    country and tier; nothing else."""
    seen = bytearray(data.events)
    wrong: list[str] = []
    for r in records:
        key, value = r.key, r.value
        click = orjson.loads(value or b"null")
        n = click.get("n") if isinstance(click, dict) else None
        if not isinstance(n, int) or not 0 <= n < data.events:
            wrong.append(f"{value!r}: no click number")
            continue
        user = data.user_of[n]
        if seen[n]:
            wrong.append(f"click {n} twice")
        seen[n] = 1
        if (key or b"").decode() != user or user not in data.profiles:
            wrong.append(f"click {n} of {user}: key {key!r}, in the table: {user in data.profiles}")
        elif (click.get("country"), click.get("tier")) != data.profiles[user]:
            wrong.append(f"click {n} of {user}: {click.get('country')}/{click.get('tier')}")
    missing = [n for n, user in enumerate(data.user_of) if user in data.profiles and not seen[n]]
    wrong += [f"click {n} of {data.user_of[n]} missing" for n in missing[:5]]
    count = len(wrong) - min(5, len(missing)) + len(missing)
    return [f"{count} wrong or missing records", *wrong[:5]] if wrong else []
