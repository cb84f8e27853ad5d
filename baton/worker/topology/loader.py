"""Finding the user's topology: ``PATH_OR_MODULE[:ATTR]``, as ``uvicorn`` and ``gunicorn`` do."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

from baton.worker.topology.dsl import Topology
from baton.worker.topology.graph import BuiltTopology

DEFAULT_ATTR = "topology"


def load(target: str) -> BuiltTopology:
    """``examples/click_counter.py``, ``myapp.streams`` or ``myapp.streams:build`` -> a built topology.

    The attribute may be a ``Topology``, a ``BuiltTopology`` or a function returning one.
    """
    where, _, attr = target.partition(":") if not Path(target).exists() else (target, "", "")
    attr = attr or DEFAULT_ATTR
    if where.endswith(".py") or Path(where).is_file():
        path = Path(where).resolve()
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    try:
        obj = getattr(module, attr)
    except AttributeError as exc:
        raise ImportError(f"{where} has no attribute {attr!r} (expected a Topology)") from exc
    if callable(obj) and not isinstance(obj, Topology | BuiltTopology):
        obj = obj()
    if isinstance(obj, Topology):
        return obj.build()
    if isinstance(obj, BuiltTopology):
        return obj
    raise TypeError(f"{target} is a {type(obj).__name__}, not a Topology")
