"""Stores keep data and changelog checkpoint in one atomic batch; internal topic planning."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from baton import JSON, STR, Topology
from baton.worker.runtime.internal_topics import CHANGELOG_CONFIG, planned_topics
from baton.worker.state.stores import MemoryStore, RocksDBStore
from baton.worker.topology.loader import load

pytestmark = pytest.mark.unit


def test_rocksdb_checkpoint_survives_reopen_and_wipe_clears_it(tmp_path: Path) -> None:
    store = RocksDBStore(tmp_path / "t" / "s")
    assert store.checkpoint() is None
    store.write([(b"a", b"1"), (b"b", b"2")], 10)
    store.write([(b"b", None)], 12)
    store.close()
    again = RocksDBStore(tmp_path / "t" / "s")
    assert again.checkpoint() == 12
    assert list(again.items()) == [(b"a", b"1")]  # the checkpoint is not a data key
    again.wipe()
    assert again.checkpoint() is None and again.get(b"a") is None
    again.close()


def test_memory_store_starts_empty() -> None:
    store = MemoryStore()
    store.write([(b"a", b"1")], None)
    assert store.checkpoint() is None and store.get(b"a") == b"1"


def test_planned_topics_size_changelogs_and_repartitions_like_the_sources() -> None:
    t = Topology()
    t.stream("orders", key=STR, value=JSON).group_by(lambda _k, v: v["c"], name="by-c").count(store="n")
    topics = {x.topic: x for x in planned_topics(t.build(), "app", {"orders": 6}, 1)}
    assert set(topics) == {"app-by-c-repartition", "app-n-changelog", "app-dlq"}
    assert topics["app-n-changelog"].num_partitions == 6
    assert topics["app-by-c-repartition"].num_partitions == 6
    config = topics["app-n-changelog"].config
    assert config is not None and config["cleanup.policy"] == "compact"
    assert int(CHANGELOG_CONFIG["segment.ms"]) <= 3_600_000


def test_loader_accepts_a_path_a_module_and_an_attribute(tmp_path: Path) -> None:
    module = tmp_path / "mytopo.py"
    module.write_text(
        "from baton import Topology\nt = Topology()\nt.stream('x').to('y')\ndef make():\n    return t\n"
    )
    assert load(str(module) + ":t").subtopologies[0].source_topics == ["x"]
    assert load(f"{module}:make").subtopologies[0].source_topics == ["x"]
    assert load("examples.click_counter").subtopologies[0].source_topics == ["clicks"]
    with pytest.raises(ImportError):
        load(f"{module}:missing")


def test_a_checkpoint_read_while_another_thread_wipes_the_store_never_meets_it_closed(tmp_path: Path) -> None:
    """The restorer wipes a store while the processing thread reads its checkpoint for the
    group's offset sums: the reader saw a closed store and the worker crashed."""
    store = RocksDBStore(tmp_path / "t" / "s")
    store.write([(b"k", b"v")], 7)
    errors: list[BaseException] = []
    done = threading.Event()

    def read() -> None:
        try:
            while not done.is_set():
                assert store.checkpoint() in (None, 7)
        except BaseException as exc:
            errors.append(exc)

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for _ in range(200):
            store.wipe()
            store.write([(b"k", b"v")], 7)
    finally:
        done.set()
        reader.join()
        store.close()
    assert errors == []
