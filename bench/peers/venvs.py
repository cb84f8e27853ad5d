"""Virtualenvs of the Python peers, one per peer and version, under ``~/.cache/baton/peers/``.

Quix Streams and faust-streaming pin their own confluent-kafka / aiokafka versions, so each
gets a venv of its own (made with the interpreter running the benchmark), never the
project's. A marker file written after a successful install makes later calls free; a
half-made venv is made again.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "dev"))

from batondev import paths

QUIX_VERSION = "3.28.1"
FAUST_VERSION = "0.15.3"

# What each peer's app needs: the peer itself, and for Faust the RocksDB binding its
# ``rocksdict://`` store uses (Quix Streams depends on rocksdict already).
PACKAGES: dict[str, list[str]] = {
    "quix": [f"quixstreams=={QUIX_VERSION}"],
    "faust": [f"faust-streaming=={FAUST_VERSION}", "rocksdict"],
}
REPORTED: dict[str, list[str]] = {
    "quix": ["quixstreams", "confluent-kafka", "rocksdict", "orjson"],
    "faust": ["faust-streaming", "aiokafka", "mode-streaming", "rocksdict"],
}


def venv_dir(peer: str) -> Path:
    version = QUIX_VERSION if peer == "quix" else FAUST_VERSION
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    return paths.CACHE / "peers" / f"{peer}-{version}-py{py}"


def python_for(peer: str) -> Path:
    """The venv's python for ``peer`` ("quix" or "faust"), installing it first if needed."""
    if peer not in PACKAGES:
        raise ValueError(f"unknown Python peer {peer!r}; known: {sorted(PACKAGES)}")
    venv = venv_dir(peer)
    python, marker = venv / "bin" / "python", venv / ".installed"
    wanted = json.dumps(PACKAGES[peer])
    if marker.exists() and marker.read_text() == wanted and python.exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    print(f"installing {' '.join(PACKAGES[peer])} into {venv}", file=sys.stderr, flush=True)
    subprocess.run(
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PACKAGES[peer]],
        check=True,
    )
    marker.write_text(wanted)
    return python


def versions(peer: str) -> dict[str, str]:
    """Installed versions of the peer's main packages, for the report."""
    script = (
        "import importlib.metadata as m, json, sys; "
        "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))"
    )
    out = subprocess.run(
        [str(python_for(peer)), "-c", script, *REPORTED[peer]], check=True, capture_output=True, text=True
    ).stdout
    found: dict[str, str] = json.loads(out)
    found["python"] = f"{sys.version_info.major}.{sys.version_info.minor}.{sys.version_info.micro}"
    return found
