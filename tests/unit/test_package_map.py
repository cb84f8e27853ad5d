"""The package map of docs/architecture.md, enforced: who may import whom.

Imports are read from the source (every ``import``, also those inside functions), so a
lazy import cannot slip past. A rule that breaks here is a design change: change the map
in docs/architecture.md with it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from batondev.paths import REPO

pytestmark = pytest.mark.unit

PACKAGE = REPO / "baton"
# Libraries that talk to a server (or carry a native engine): pure modules import none.
CLIENTS = (
    "confluent_kafka",
    "kafka",
    "kubernetes",
    "kopf",
    "pyspark",
    "rocksdict",
    "prometheus_client",
    "pyarrow",
)
# Modules that are pure logic by design: unit-tested without a server, never doing I/O.
PURE = (
    "baton.images",
    "baton.clients.settings",
    "baton.worker.topology",
    "baton.worker.naming",
    "baton.worker.assignment.assignor",
    "baton.worker.assignment.fencing",
    "baton.worker.assignment.model",
    "baton.worker.assignment.wire",
    "baton.control.messages",
    "baton.control.gate",
    "baton.control.flipper",
    "baton.operator.deploy",
    "baton.operator.deploy_record",
    "baton.operator.builders",
    "baton.operator.spec",
    "baton.operator.drift",
    "baton.operator.constants",
    "baton.compactor.cronjob",
    "baton.compactor.kubernetes",
    "baton.compactor.sparkapp",
    "baton.compactor.retention",
    "baton.worker.state.snapshot_uri",
    "baton.worker.processes.plan",
)
# (importer prefix, imported prefix, why not)
FORBIDDEN = [
    *(
        ("baton.clients", other, "client settings are shared by every part; they import none of them")
        for other in ("baton.worker", "baton.operator", "baton.compactor", "baton.control", "baton.testing")
    ),
    ("baton.worker", "baton.operator", "the worker image does not ship the operator"),
    ("baton.worker", "baton.compactor", "the worker does not run Spark"),
    ("baton.control", "baton.worker", "the flip protocol is shared by worker and operator"),
    ("baton.control", "baton.operator", "the flip protocol is shared by worker and operator"),
    ("baton.worker.topology", "baton.worker.state", "a topology is data; stores are the runtime's"),
    ("baton.worker.topology", "baton.worker.runtime", "a topology is data; the loop runs it"),
    ("baton.worker.state", "baton.worker.runtime", "state is driven by the loop, never the reverse"),
    ("baton.worker.state", "baton.worker.assignment", "stores do not know the group"),
    ("baton.worker.assignment", "baton.worker.runtime", "the assignor decides; the loop acts"),
    ("baton.worker.assignment", "baton.worker.state", "the assignor sees offset sums, not stores"),
    ("baton.operator", "baton.worker.runtime", "the operator renders workers, it never runs one"),
    ("baton.worker.runtime", "baton.worker.processes", "a worker process does not know it is supervised"),
    *(
        (
            "baton.worker.runtime.processors",
            f"baton.worker.runtime.{driver}",
            "processors hold no Kafka client: the task builds and drives them, never the reverse",
        )
        for driver in ("tree", "task", "fused", "task_manager", "worker", "producer", "clients", "commit")
    ),
    *(
        (
            "baton.worker.runtime.processors.base",
            f"baton.worker.runtime.processors.{family}",
            "every family builds on base and registers itself; base names none of them",
        )
        for family in ("stateless", "aggregate", "windowed", "joins", "table", "custom")
    ),
    ("baton.testing", "baton.operator", "users' tests of topologies need no operator"),
]


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module)
                names.update(f"{node.module}.{a.name}" for a in node.names)
        out[_module(path)] = names
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_the_map_covers_every_module() -> None:
    """The rules name packages that exist (a rename must update them, not silently void them)."""
    modules = set(_imports())
    for prefix in PURE + tuple(a for a, _b, _ in FORBIDDEN) + tuple(b for _a, b, _ in FORBIDDEN):
        assert any(_under(m, prefix) for m in modules), f"{prefix} names no module"


def test_no_forbidden_import_direction() -> None:
    broken = [
        f"{module} imports {name}: {why}"
        for module, names in _imports().items()
        for importer, imported, why in FORBIDDEN
        if _under(module, importer)
        for name in names
        if _under(name, imported)
    ]
    assert not broken, "\n".join(broken)


def test_pure_modules_import_no_client_library() -> None:
    imports = _imports()
    broken = [
        f"{module} imports {name}"
        for module, names in imports.items()
        if any(_under(module, p) for p in PURE)
        for name in names
        if any(_under(name, c) for c in CLIENTS)
    ]
    assert not broken, "\n".join(broken)


def test_pure_modules_import_only_pure_baton_modules() -> None:
    """Purity is transitive: a pure module importing an impure one would drag a client in."""
    imports = _imports()
    modules = set(imports)
    broken = [
        f"{module} imports {name}"
        for module, names in imports.items()
        if any(_under(module, p) for p in PURE)
        for name in names
        if name in modules and name.startswith("baton.") and name != "baton"
        if not any(_under(name, p) for p in PURE) and name not in {"baton.worker.config"}
    ]
    assert not broken, "\n".join(broken)


def test_the_public_api_is_the_topology_dsl() -> None:
    import baton

    assert "baton" in {_module(PACKAGE / "__init__.py")}
    for name in baton.__all__:
        assert getattr(baton, name) is not None, name
    assert {"Topology", "JSON", "STR", "Json", "tumbling"} <= set(baton.__all__)
    imported = _imports()["baton"]
    assert all(_under(n, "baton.worker.topology") for n in imported if n.startswith("baton.")), imported
