"""The package map of docs/architecture.md, enforced: who may import whom.

Imports are read from the source (every ``import``, also those inside functions), so a
lazy import cannot slip past. A rule that breaks here is a design change: change the map
in docs/architecture.md with it. Besides the arrows: the operator's pure part is the folder
``baton/operator/core`` (pure by prefix, and it imports no operator module outside it), and
the top-level packages import one another without a cycle. And the rule for tests/ that
docs/architecture.md states beside the map: no test module imports another ``test_*`` module.
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
    # the operator's pure part is one folder: whatever is put there must stay pure
    "baton.operator.core",
    "baton.compactor.retention",
    "baton.worker.state.snapshot_uri",
    "baton.worker.processes.plan",
)
# The operator's pure part: everything under it is pure (PURE), and it builds on nothing else of
# the operator's; outside the operator, nothing reaches past it.
CORE = "baton.operator.core"
# The nodes of the import graph that must have no cycle: these packages, and each module directly
# under baton/ (baton itself, cli, images, ...) as a node of its own.
TOP_LEVEL = (
    "baton.worker",
    "baton.operator",
    "baton.compactor",
    "baton.control",
    "baton.clients",
    "baton.testing",
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
    (
        "baton.operator",
        "baton.compactor",
        "the operator renders the compactor's Job (operator/core/compaction), it never runs it; "
        "the compactor reads the names it is given from the operator's core, so an arrow back is a cycle",
    ),
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


def _owner(name: str, modules: set[str]) -> str | None:
    """The module an imported name lives in: ``baton.operator.core.spec.StreamApp`` is
    ``baton.operator.core.spec``'s; None for a name outside baton."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _node(module: str) -> str:
    return next((p for p in TOP_LEVEL if _under(module, p)), module)


def _package_graph(imports: dict[str, set[str]]) -> dict[str, dict[str, str]]:
    """{node: {node it imports: one import that makes the arrow}} over TOP_LEVEL and the modules
    directly under baton/."""
    modules = set(imports)
    graph: dict[str, dict[str, str]] = {_node(m): {} for m in modules}
    for module, names in sorted(imports.items()):
        for name in sorted(names):
            owner = _owner(name, modules)
            if owner is not None and _node(owner) != _node(module):
                graph[_node(module)].setdefault(_node(owner), f"{module} imports {owner}")
    return graph


def _cycle(graph: dict[str, dict[str, str]]) -> list[str] | None:
    """One cycle of ``graph`` as the path around it (its first node again at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for target in sorted(graph.get(node, {})):
            found = visit(target)
            if found is not None:
                return found
        path.pop()
        done.add(node)
        return None

    for node in sorted(graph):
        found = visit(node)
        if found is not None:
            return found
    return None


def test_the_cycle_finder_finds_cycles() -> None:
    """The test below passes on any graph in which this finds nothing."""
    arrows = {"a": {"b": ""}, "b": {"c": ""}, "c": {"a": ""}, "d": {"a": ""}}
    assert _cycle(arrows) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b": "", "c": ""}, "b": {"c": ""}, "c": {}}) is None


def test_no_cycle_between_top_level_packages() -> None:
    """The worker, operator, compactor, control, clients and testing packages and the modules
    directly under baton/ import one another in one direction only (the compactor reads the
    operator's core; the operator imports nothing of the compactor)."""
    graph = _package_graph(_imports())
    assert set(TOP_LEVEL) | {"baton", "baton.cli"} <= set(graph), sorted(graph)
    assert "baton.control" in graph["baton.operator"], "the graph lost its arrows"
    cycle = _cycle(graph)
    arrows = [graph[a][b] for a, b in zip(cycle or [], (cycle or [])[1:], strict=False)]
    assert cycle is None, "import cycle " + " -> ".join(cycle or []) + ":\n" + "\n".join(arrows)


def test_the_operator_core_imports_no_operator_module_outside_it() -> None:
    """The rest of the operator (kopf handlers, the reconciler, the API and Kafka clients) builds
    on its core, never the reverse: a core module that needs one has I/O to hand back to its caller."""
    imports = _imports()
    modules = set(imports)
    core = sorted(m for m in modules if _under(m, CORE))
    assert len(core) > 1, core
    broken = [
        f"{module} imports {name}"
        for module in core
        for name in sorted(imports[module])
        if (owner := _owner(name, modules)) is not None
        if _under(owner, "baton.operator") and not _under(owner, CORE)
    ]
    assert not broken, "\n".join(broken)


def test_outside_the_operator_only_its_core_is_imported() -> None:
    """The compactor takes the StreamApp's names and the variables its CronJob sets from the
    operator's core (pure, needing no kopf or Kubernetes client); nothing outside the operator
    reaches its I/O modules."""
    imports = _imports()
    modules = set(imports)
    reached = {
        (module, owner)
        for module, names in imports.items()
        if not _under(module, "baton.operator")
        for name in names
        if (owner := _owner(name, modules)) is not None and _under(owner, "baton.operator")
    }
    assert any(_under(module, "baton.compactor") for module, _imported in reached), reached
    broken = sorted(f"{module} imports {owner}" for module, owner in reached if not _under(owner, CORE))
    assert not broken, "\n".join(broken)


def test_the_public_api_is_the_topology_dsl() -> None:
    import baton

    assert "baton" in {_module(PACKAGE / "__init__.py")}
    for name in baton.__all__:
        assert getattr(baton, name) is not None, name
    assert {"Topology", "JSON", "STR", "Json", "tumbling"} <= set(baton.__all__)
    imported = _imports()["baton"]
    assert all(_under(n, "baton.worker.topology") for n in imported if n.startswith("baton.")), imported


LONG_MODULE = 600


def test_a_module_over_600_lines_says_at_its_top_why_it_stays_whole() -> None:
    """Issue 48's rule: a long module is either split along a seam or says why it has none, in
    its docstring, with the words "one module of this size" (grep finds every such reason)."""
    long = {
        _module(path): path
        for path in sorted(PACKAGE.rglob("*.py"))
        if len(path.read_text().splitlines()) > LONG_MODULE
    }
    broken = [
        f"{module} ({len(path.read_text().splitlines())} lines)"
        for module, path in long.items()
        if "one module of this size" not in (ast.get_docstring(ast.parse(path.read_text())) or "")
    ]
    assert not broken, "over 600 lines without a reason at the top: " + ", ".join(broken)


TESTS = REPO / "tests"


def _test_modules_imported(source: str) -> list[str]:
    """The ``test_*`` modules a file imports, in any form: ``import tests.x.test_y``,
    ``from tests.x.test_y import f``, ``from tests.x import test_y``, ``from . import test_y``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [f"{node.module or ''}.{a.name}" for a in node.names]
        else:
            continue
        found += [n.lstrip(".") for n in names if any(p.startswith("test_") for p in n.split("."))]
    return found


def test_the_test_import_finder_finds_each_form() -> None:
    source = "\n".join([
        "import tests.e2e.test_a",
        "from tests.e2e.test_b import Clicks",
        "from tests.integration import test_c as chart",
        "from . import test_d",
        "from .test_e import f",
        "from tests.support.deploy import Clicks",
        "from baton.testing import wait_for",
        "import tests.conftest",
    ])  # fmt: skip
    assert _test_modules_imported(source) == [
        "tests.e2e.test_a",
        "tests.e2e.test_b.Clicks",
        "tests.integration.test_c",
        "test_d",
        "test_e.f",
    ]


def test_no_test_module_imports_another() -> None:
    """docs/architecture.md: tests share helpers through tests/support/ and dev/batondev/, and no
    ``test_*`` module is imported by another file under tests/. A test module is pytest's to
    collect, not a library: a helper kept in one is tied to a file that is renamed or deleted with
    its test, brings that module's marks and fixtures along, and is not where the next test looks
    for it (tests/support/)."""
    broken = [
        f"{path.relative_to(REPO)} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for name in _test_modules_imported(path.read_text())
    ]
    assert not broken, "move the shared helper to tests/support/: " + "; ".join(broken)
