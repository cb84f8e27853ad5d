"""Model check of a task's store view: the write cache, the read cache and commits, in any order.

``TaskStore`` keeps uncommitted updates (and, since the read cache, committed values) in
memory in front of RocksDB, flushes when a worker-wide budget runs out, and is committed or
rolled back by the runtime. Exactly-once commits are pipelined (``runtime/commit.py``):
``begin_commit`` cuts what a commit covers, updates go on while it is in flight, and it
ends (``commit``) when it succeeds, at the latest when anything is sent, since a send waits
for it. Over random interleavings of puts, deletes, reads, flushes, commits in one step,
pipelined commits that succeed or fail, and aborts across two stores sharing one small
budget, it must always:

* read what the application last wrote (uncommitted updates included);
* after an abort, read exactly the last committed values again;
* keep the persistent store equal to the last committed values, never ahead of them;
* log to the changelog, by each commit, the latest value of every key it changed;
* forward each flushed entry's latest value downstream.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from baton import JSON, STR
from baton.worker.state.stores import MemoryStore
from baton.worker.state.task_store import MISSING, RETAINED_ENTRY_BYTES, CacheBudget, TaskStore, entry_size
from baton.worker.topology.context import RecordContext
from baton.worker.topology.graph import StoreSpec
from tests.support.tasks import Sent

pytestmark = pytest.mark.unit

KEYS = [b"a", b"b", b"c", b"d", b"e"]
STORES = 2
keys = st.sampled_from(KEYS)
stores = st.integers(0, STORES - 1)


@dataclass
class InFlight:
    """What a pipelined commit covers, per store: the values, and the changelog's length."""

    values: list[dict[bytes, int]]
    logged: list[int]


class TaskStoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # room for ~3 dirty entries, and ~4 retained ones, over both stores
        self.budget = CacheBudget(3 * entry_size(b"a", 10) + 5)
        self.budget.retain_limit = 4
        assert self.budget.limit // RETAINED_ENTRY_BYTES <= 4
        self.persistent = [MemoryStore() for _ in range(STORES)]
        self.log = [Sent() for _ in range(STORES)]  # each store's changelog, as sent
        self.forwarded: list[dict[bytes, Any]] = [{} for _ in range(STORES)]
        self.stores = [self._store(i) for i in range(STORES)]
        self.committed: list[dict[bytes, int]] = [{} for _ in range(STORES)]
        self.current: list[dict[bytes, int]] = [{} for _ in range(STORES)]
        self.logged_at_commit: list[int] = [0] * STORES
        self.changed: list[set[bytes]] = [set() for _ in range(STORES)]  # since the last commit or abort
        self.next_value = 1
        self.in_flight: InFlight | None = None

    def _store(self, i: int) -> TaskStore:
        forwarded = self.forwarded[i]
        store = TaskStore(
            spec=StoreSpec(f"s{i}", STR, JSON),
            persistent=self.persistent[i],
            changelog_topic=f"cl{i}",
            partition=0,
            send=self._sender(i),
            ctx=RecordContext(),
            caching=True,
            budget=self.budget,
        )
        store.forward = lambda key, value: forwarded.__setitem__(key.encode(), value)
        return store

    def _sender(self, i: int) -> Any:
        """A store's send: like ``Output.send``, it first ends a commit in flight (which succeeds)."""
        log = self.log[i]

        def send(*record: Any) -> None:
            if self.in_flight is not None:
                self.finish_ok()
            log(*record)

        return send

    @rule(i=stores, key=keys)
    def put(self, i: int, key: bytes) -> None:
        value, self.next_value = self.next_value, self.next_value + 1
        self.stores[i].put(key, key.decode(), value)
        self.current[i][key] = value
        self.changed[i].add(key)

    @rule(i=stores, key=keys)
    def delete(self, i: int, key: bytes) -> None:
        self.stores[i].put(key, key.decode(), None)
        self.current[i].pop(key, None)
        self.changed[i].add(key)

    @rule(i=stores, key=keys)
    def read(self, i: int, key: bytes) -> None:
        got = self.stores[i].get(key)
        want = self.current[i].get(key, MISSING)
        assert got == want if want is not MISSING else got is MISSING, (key, got, want)

    @rule(i=stores)
    def flush(self, i: int) -> None:
        self.stores[i].flush()

    @rule()
    def commit(self) -> None:
        """The runtime's commit in one step: flush every store, then persist (the transaction succeeded)."""
        self.begin_commit()
        self.finish_ok()

    @rule()
    def begin_commit(self) -> None:
        """A commit's first part: flush every store and cut what the commit covers."""
        if self.in_flight is not None:  # the runtime ends the one in flight first
            self.finish_ok()
        for i, store in enumerate(self.stores):
            store.flush()
            for key in self.changed[i]:  # downstream saw each changed key's latest value
                assert self.forwarded[i].get(key) == self.current[i].get(key), (i, key)
            self.changed[i].clear()
        for store in self.stores:
            store.begin_commit()
        self.in_flight = InFlight([dict(c) for c in self.current], [len(log) for log in self.log])

    @precondition(lambda self: self.in_flight is not None)
    @rule()
    def finish_ok(self) -> None:
        """The transaction in flight succeeded: persist exactly what it covered."""
        flight, self.in_flight = self.in_flight, None
        assert flight is not None
        for i, store in enumerate(self.stores):
            store.commit(flight.logged[i])
            self.committed[i] = flight.values[i]
            self.logged_at_commit[i] = flight.logged[i]

    @precondition(lambda self: self.in_flight is not None)
    @rule()
    def finish_failed(self) -> None:
        """The transaction in flight failed: it and everything since is dropped (tasks rewind)."""
        self.in_flight = None
        self._forget()

    @rule()
    def abort(self) -> None:
        """The runtime aborts: a commit in flight ends first (here it succeeds), the rest is forgotten."""
        if self.in_flight is not None:
            self.finish_ok()
        self._forget()

    def _forget(self) -> None:
        for i, store in enumerate(self.stores):
            store.discard()
            self.current[i] = dict(self.committed[i])
            del self.log[i][self.logged_at_commit[i] :]
            self.changed[i].clear()

    @precondition(lambda self: any(self.current))
    @rule(i=stores)
    def read_everything(self, i: int) -> None:
        for key in KEYS:
            self.read(i, key)

    @invariant()
    def persistent_is_the_last_commit(self) -> None:
        for i in range(STORES):
            held = {k: orjson.loads(v) for k, v in self.persistent[i].items()}
            assert held == self.committed[i], (i, held, self.committed[i])

    @invariant()
    def the_changelog_replays_to_the_last_commit(self) -> None:
        for i in range(STORES):
            replayed: dict[bytes, int] = {}
            for _topic, key, raw, _partition, _headers in self.log[i][: self.logged_at_commit[i]]:
                assert key is not None
                if raw is None:
                    replayed.pop(key, None)
                else:
                    replayed[key] = orjson.loads(raw)
            assert replayed == self.committed[i], (i, replayed, self.committed[i])

    @invariant()
    def budgets_are_kept(self) -> None:
        assert self.budget.used <= self.budget.limit
        assert 0 <= self.budget.retained <= self.budget.retain_limit


TaskStoreModel.TestCase.settings = settings(max_examples=300, stateful_step_count=40, deadline=None)
TestTaskStoreModel = TaskStoreModel.TestCase
