"""dev/stack finds its own processes by pid file and a marker in their environment."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
from batondev import paths, procs


@pytest.fixture
def run_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(paths, "RUN", tmp_path)
    return tmp_path


def test_a_started_process_is_found_at_once(run_dir: Path) -> None:
    # checked straight after start(), when the child may still be inside execve
    pids = [
        procs.start(f"sleeper{i}", [sys.executable, "-c", "import time; time.sleep(30)"]) for i in range(5)
    ]
    try:
        assert [procs.running_pid(f"sleeper{i}") for i in range(5)] == pids
    finally:
        for i in range(5):
            procs.stop(f"sleeper{i}", timeout=5)
    assert all(procs.running_pid(f"sleeper{i}") is None for i in range(5))


def test_a_dead_child_is_not_running(run_dir: Path) -> None:
    pid = procs.start("quick", [sys.executable, "-c", "pass"])
    for _ in range(100):  # the child is our unreaped zombie once it exits
        if Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z":
            break
        subprocess.run(["sleep", "0.05"], check=True)
    assert procs.running_pid("quick") is None


def test_a_recycled_pid_that_is_not_ours_is_not_running(run_dir: Path) -> None:
    (run_dir / "other").mkdir()
    procs.pid_file("other").write_text("1")  # init: alive, but not started by the stack
    assert procs.running_pid("other") is None


def test_cpu_time_counts_a_busy_child_and_the_machine() -> None:
    """bench/throughput.py's cores columns: a child that spins for 0.3 s used about that much CPU."""
    busy_before = procs.busy_seconds()
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ninput()",
        ],
        stdin=subprocess.PIPE,
    )
    try:
        spent = 0.0
        for _ in range(100):  # until the loop is done: it then waits on stdin
            spent = procs.cpu_seconds(child.pid)
            if spent >= 0.3:
                break
            time.sleep(0.05)
        assert 0.3 <= spent < 1.0
        assert procs.busy_seconds() - busy_before >= 0.3
    finally:
        child.communicate(b"\n", timeout=10)


def test_a_process_tree_holds_its_busy_grandchild() -> None:
    """bench/throughput.py's app columns: a pod's supervisor spends little, its workers the rest."""
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass\ninput()"
    parent = subprocess.Popen(
        [sys.executable, "-c", f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', {spin!r}])"],
        stdin=subprocess.PIPE,
    )
    try:
        tree: list[int] = []
        for _ in range(200):  # until the grandchild's loop is done: it then waits on stdin
            tree = procs.process_tree(parent.pid)
            if len(tree) == 2 and procs.cpu_seconds(tree[1]) >= 0.3:
                break
            time.sleep(0.05)
        assert tree[0] == parent.pid and len(tree) == 2, tree
        assert 0.3 <= procs.cpu_seconds(tree[1]) < 1.0  # the grandchild's own time
    finally:
        parent.communicate(b"\n", timeout=10)
