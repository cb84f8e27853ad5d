"""The state stores' sizes as Prometheus gauges, read from RocksDB when Prometheus scrapes.

Read at scrape time rather than kept up to date: RocksDB already counts (estimated keys, SST
and memtable bytes, block cache, pending compaction), so the processing thread pays nothing.
Each series names the task, the store and the copy's role here (active, standby), so a
dashboard can tell the state a member serves from the state it keeps warm.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from baton.worker.state.stores import ROCKSDB_STATS, KeyValueStore

# statistic -> help; the family is ``baton_store_<statistic>``
HELP = {
    "estimated_keys": "Keys in the store, as RocksDB estimates them",
    "sst_bytes": "Bytes of the store's SST files on disk",
    "memtable_bytes": "Bytes of the store's memtables (writes not yet flushed to SST files)",
    "block_cache_usage_bytes": "Bytes the store's RocksDB block cache holds",
    "block_cache_capacity_bytes": "Capacity of the store's RocksDB block cache in bytes",
    "pending_compaction_bytes": "Bytes RocksDB estimates compaction has yet to rewrite",
    "compaction_pending": "1 when RocksDB has a compaction waiting to run",
}
assert set(HELP) == set(ROCKSDB_STATS)
LABELS = ["task", "store", "role"]

# (task, store name, role, store): every store open on this member
OpenStores = Callable[[], Iterable[tuple[str, str, str, KeyValueStore]]]


class StoreMetrics(Collector):
    def __init__(self, open_stores: OpenStores) -> None:
        self._open_stores = open_stores

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families without samples: registering must not read a store."""
        for stat, text in HELP.items():
            yield GaugeMetricFamily(f"baton_store_{stat}", text, labels=LABELS)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        families = {
            stat: GaugeMetricFamily(f"baton_store_{stat}", text, labels=LABELS) for stat, text in HELP.items()
        }
        for task, name, role, store in self._open_stores():
            for stat, value in store.stats().items():
                families[stat].add_metric([task, name, role], value)
        yield from families.values()
