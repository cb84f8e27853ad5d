"""Read-only views of a topology's stores in the test driver, by typed key.

A test asks for a store by name and reads values by the key it knows (``"alice"``), not
by serialized bytes or partition: the view serializes the key with the store's key serde,
finds the task that owns it as the producers' partitioner would, and reads the task's
store as its processors see it (uncommitted updates included, as Kafka Streams' driver
reads its stores). Windowed and session stores are read by key and window instead.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from baton.worker.runtime.queries import partition_for
from baton.worker.state.stores import KeyValueStore
from baton.worker.state.task_store import DELETED, MISSING, TaskStore
from baton.worker.topology.serdes import Serde
from baton.worker.topology.windows import SessionWindowedSerde, Windowed, WindowedSerde

# One partition's store: the task's view of it (its own stores) or the plain store (tables' stores).
PartitionStore = TaskStore | KeyValueStore


def _get(store: PartitionStore, value_serde: Serde[Any], key_bytes: bytes) -> Any:
    """The value under ``key_bytes``, or ``MISSING``."""
    if isinstance(store, TaskStore):
        return store.get(key_bytes)
    raw = store.get(key_bytes)
    return MISSING if raw is None else value_serde.deserialize(raw)


def _keys(store: PartitionStore) -> set[bytes]:
    """Every key present: committed ones and, for a task's store, those updated since."""
    if isinstance(store, TaskStore):
        keys = {k for k, _v in store.persistent.items()}
        for key, value in store.overlay.items():
            (keys.discard if value is DELETED else keys.add)(key)
        return keys
    return {k for k, _v in store.items()}


class _StoreView:
    def __init__(
        self,
        name: str,
        partitions: Mapping[int, PartitionStore],
        key_serde: Serde[Any],
        value_serde: Serde[Any],
        partition_of: Callable[[bytes], int] | None = None,
    ) -> None:
        """``partition_of``: which partition holds a key; ``None`` for a global table (one store)."""
        self.name = name
        self._partitions, self._key_serde, self._value_serde = partitions, key_serde, value_serde
        count = len(partitions)
        self._partition_of = partition_of or (lambda key: partition_for(key, count))

    def _entries(self) -> Iterator[tuple[bytes, Any]]:
        for store in self._partitions.values():
            for key_bytes in sorted(_keys(store)):
                if not key_bytes:  # a windowed store's stream time, not an entry
                    continue
                value = _get(store, self._value_serde, key_bytes)
                if value is not MISSING:
                    yield key_bytes, value


class KeyValueView(_StoreView):
    """A key-value store (or a table) as a read-only mapping: ``view["alice"]``, ``dict(view)``."""

    def get(self, key: Any, default: Any = None) -> Any:
        key_bytes = self._key_serde.serialize(key)
        value = _get(self._partitions[self._partition_of(key_bytes)], self._value_serde, key_bytes)
        return default if value is MISSING else value

    def __getitem__(self, key: Any) -> Any:
        value = self.get(key, MISSING)
        if value is MISSING:
            raise KeyError(key)
        return value

    def __contains__(self, key: object) -> bool:
        return self.get(key, MISSING) is not MISSING

    def items(self) -> list[tuple[Any, Any]]:
        return [(self._key_serde.deserialize(k), v) for k, v in self._entries()]

    def keys(self) -> list[Any]:
        return [k for k, _v in self.items()]

    def __iter__(self) -> Iterator[Any]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self.items())

    def to_dict(self) -> dict[Any, Any]:
        return dict(self.items())


class WindowStoreView(_StoreView):
    """A windowed (or session) aggregation's store: a key's windows and their values.

    Kafka Streams' ``WindowStore.fetch(key, from, to)``/``SessionStore.fetch(key)``: the windows of
    ``key`` whose start lies within ``time_from..time_to``, by start. Windows past their
    retention are gone, as on a worker."""

    def __init__(
        self,
        name: str,
        partitions: Mapping[int, PartitionStore],
        key_serde: WindowedSerde[Any] | SessionWindowedSerde[Any],
        value_serde: Serde[Any],
    ) -> None:
        super().__init__(name, partitions, key_serde, value_serde)
        self._windowed = key_serde

    def _window_of(self, key_bytes: bytes) -> Windowed[Any]:
        return self._windowed.deserialize(key_bytes)

    def fetch(
        self, key: Any, time_from: int | None = None, time_to: int | None = None
    ) -> list[tuple[Windowed[Any], Any]]:
        low = -(2**63) if time_from is None else time_from
        high = 2**63 - 1 if time_to is None else time_to
        return [(w, v) for w, v in self.all() if w.key == key and low <= w.start <= high]

    def all(self) -> list[tuple[Windowed[Any], Any]]:
        """Every window of every key, by key bytes, then start and end."""
        found = [(self._window_of(k), v, k) for k, v in self._entries()]
        found.sort(key=lambda e: (self._windowed.inner.serialize(e[0].key), e[0].start, e[0].end))
        return [(w, v) for w, v, _k in found]
