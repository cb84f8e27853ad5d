"""Where the stack keeps its installs and its running state.

Installs live under ``~/.cache/baton/<tool>-<version>/`` so a fresh clone (CI) reuses
them; the running stack's data and logs live under ``~/.cache/baton/run/`` so that
``dev/stack env`` from any clone finds the stack that is already up.
"""

from __future__ import annotations

import os
from pathlib import Path

CACHE = Path(os.environ.get("BATON_CACHE", Path.home() / ".cache" / "baton"))
RUN = Path(os.environ.get("BATON_RUN_DIR", CACHE / "run"))


def tool_dir(tool: str, version: str) -> Path:
    """The cache folder of one tool at one version."""
    return CACHE / f"{tool}-{version}"


# The checkout's own files that tests, benchmarks and the demo refer to, named once.
REPO = Path(__file__).resolve().parents[2]
CRD = REPO / "crds" / "streamapps.baton.dev.yaml"
EXAMPLE = REPO / "examples" / "click-counter.yaml"
CLICK_COUNTER = REPO / "examples" / "click_counter.py"
FIXTURES = REPO / "tests" / "fixtures"
BENCH = REPO / "bench"
