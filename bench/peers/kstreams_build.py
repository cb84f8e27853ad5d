"""Build the Kafka Streams peer (bench/peers/kstreams/) and give the command that runs it.

The app runs one of its topologies, named by its argument: ``clicks`` (bench/peers/run.py's
click counter, the default), ``windowed`` or ``join`` (bench/throughput.py's ``--topology``).

Maven compiles the app and writes its runtime classpath once per kafka-streams version and
content of ``kstreams/`` (pom.xml and sources) into
``~/.cache/baton/peers/kstreams-<VERSION>-<hash>/``, resolving from Maven Central only into
the project's local repository (``batondev.maven``); nothing is written inside the repo. A
later call with the same sources finds the finished build and does not run Maven. Two
processes that ask at once (two benches' tests on two pytest workers) build it once: the
second waits on a lock for the first.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "dev"))

from batondev import maven, paths, versions
from batondev.requirements import need, run

VERSION = versions.KAFKA
"""The kafka-streams version: the broker's, passed to the pom as ``-Dkafka.version``."""

SOURCE = Path(__file__).resolve().parent / "kstreams"
MAIN_CLASS = "dev.baton.bench.Bench"
TOPOLOGIES = ("clicks", "windowed", "join")
HEAP = ["-Xms256m", "-Xmx1g"]


def _sources() -> list[Path]:
    return sorted(p for p in SOURCE.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def source_hash() -> str:
    """A short hash of pom.xml and everything under src/, paths included."""
    digest = hashlib.sha256()
    for path in _sources():
        digest.update(path.relative_to(SOURCE).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()[:12]


def build_dir() -> Path:
    return paths.CACHE / "peers" / f"kstreams-{VERSION}-{source_hash()}"


def build() -> Path:
    """Compile the app and write its classpath unless already done; returns the build folder."""
    out = build_dir()
    if (out / ".complete").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / f"{out.name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if not (out / ".complete").exists():  # unless another process built it meanwhile
            _build(out)
    return out


def _build(out: Path) -> None:
    need("java")
    need("mvn")
    shutil.rmtree(out, ignore_errors=True)
    (out / "empty").mkdir(parents=True)
    settings = out / "settings.xml"
    settings.write_text(maven.SETTINGS.format(local=paths.CACHE / "m2", empty=(out / "empty").as_uri()))
    started = time.monotonic()
    run(
        [
            "mvn",
            "-B",
            "-q",
            "-s",
            str(settings),
            "-f",
            str(SOURCE / "pom.xml"),
            f"-Dkafka.version={VERSION}",
            f"-DbuildDir={out / 'target'}",
            "compile",
            "dependency:build-classpath",
            f"-Dmdep.outputFile={out / 'classpath.txt'}",
            "-Dmdep.includeScope=runtime",
        ],
        log=str(out / "build.log"),
    )
    (out / ".complete").write_text(f"built in {time.monotonic() - started:.1f}s\n")


def command(topology: str = "clicks") -> list[str]:
    """Build if needed; the argv that runs ``topology`` (configured by the CONTRACT.md environment)."""
    if topology not in TOPOLOGIES:
        raise ValueError(
            f"the Kafka Streams peer has no topology {topology!r} (it has {', '.join(TOPOLOGIES)})"
        )
    out = build()
    classpath = (out / "classpath.txt").read_text().strip()
    return [need("java"), *HEAP, "-cp", f"{out / 'target' / 'classes'}:{classpath}", MAIN_CLASS, topology]


if __name__ == "__main__":
    print(" ".join(command()))
