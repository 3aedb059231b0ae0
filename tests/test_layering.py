"""Imports point one way (DESIGN.md, "Layout"), and no package reaches into another's privates.

cli, serve -> cluster -> supervisors -> flows, durable -> branch -> actors -> operations -> llm,
tools, context, memory -> messages; branch (the Branch aggregate and its facade) builds on
the actor runtime, which declares what it needs of a branch; store and testing sit beside
them; cluster (the ray extra) builds on supervisors; durable (the turn journal, the commit
hand-over, a session's store wiring) builds on actors, which declare the protocols it implements;
flows (graphs of work across branches) builds on actors and knows no Session class: a
session hands a run its name resolution and observer, and ``Session.flow`` delegates to it;
mcp (the optional extra) sits beside tools
and supervisors: it builds on actors, tools and messages and never imports
supervisors at run time, while ``Session.spawn_mcp`` is the one door from
supervisors into it (a lazy import, so ``import pride`` never loads the SDK).
telemetry (the otel extra) sits beside actors: it installs itself in the
actors' tracer slot and reads llm's retry notices; only the CLI imports it
(lazily, for ``pride run --otel``), so ``import pride`` never loads OpenTelemetry.
Imports under ``if TYPE_CHECKING:`` count too: a type-only import is still a
dependency a reader has to follow (and a cycle through one is a cycle).

Every check here reads the source through one walker, `imports`, which
resolves each import (relative ones too, at any depth, inside functions and
under TYPE_CHECKING) to the absolute module it names.
"""

from __future__ import annotations

import ast
import collections
from collections.abc import Iterable
from pathlib import Path

import attrs
import pytest

import pride

ROOT = Path(pride.__file__).parent

# Pride-wide helpers: modules at pride's top, outside the layers, importing nothing
# of pride (checked below), which any layer may use.
HELPERS = {"_version", "_public", "_hypercorn", "_lines", "_places", "_repeats"}
BASE = {"errors", "messages"} | HELPERS
ALLOWED: dict[str, set[str]] = {
    "messages": set(),
    "errors": {"messages", "_public"},
    "llm": BASE,
    "tools": BASE,
    "memory": BASE,
    "context": BASE | {"llm"},
    # Budgets at run time: accounts and meters over the messages' Budget and Usage
    # (context counts a streamed reply's tokens).
    "budget": BASE | {"context"},
    "operations": BASE | {"llm", "tools", "context", "memory"},
    "actors": BASE | {"llm", "tools", "context", "memory", "budget", "operations"},
    # The Branch aggregate and its facade, above the runtime that serves it (actors
    # declare what they need of a branch: pride.actors.actor.ServedBranch).
    "branch": BASE | {"llm", "tools", "context", "memory", "operations", "actors"},
    "flows": BASE
    | {"llm", "tools", "context", "memory", "budget", "operations", "actors", "branch", "store"},
    # Durable turns build on the actor runtime and the store; actors know none of it
    # (they declare the protocols it implements).
    "durable": BASE
    | {"llm", "tools", "context", "memory", "operations", "actors", "branch", "store"},
    "supervisors": BASE
    | {"llm", "tools", "context", "memory", "budget", "operations", "actors", "branch", "store"}
    | {"mcp", "flows"}
    | {"durable"},
    "mcp": BASE | {"llm", "tools", "context", "memory", "operations", "actors", "branch"},
    "telemetry": BASE | {"llm", "actors"},
    "store": BASE,
    "testing": BASE | {"llm"},
    "cluster": BASE
    | {"llm", "tools", "context", "memory", "operations", "actors", "branch", "flows"}
    | {"supervisors"}
    | {"store", "durable"},
    # The client of pride serve: the wire (messages, errors), llm's SSE parser, and
    # the Target protocol its refs implement.
    "client": BASE | {"llm", "actors"},
    # The front door (pride serve) builds on the tree it serves, never on the CLI.
    "serve": BASE
    | {"llm", "tools", "context", "memory", "operations", "actors", "branch", "flows"}
    | {"supervisors"}
    | {"store", "cluster"},
    "cli": BASE
    | {
        "serve",
        "branch",
        "llm",
        "tools",
        "context",
        "memory",
        "operations",
        "actors",
        "supervisors",
        "store",
        "testing",
        "mcp",
        "cluster",
        "telemetry",
        "flows",
        "durable",
    },
    # asyncio programs (pride.aio): a Session run as a guest of an asyncio loop.
    "aio": BASE
    | {"llm", "tools", "context", "memory", "operations", "actors", "branch", "flows"}
    | {"supervisors"}
    | {"store"},
}

# Every package of pride: none of its modules imports a module of its own package
# back (type-only imports and package faces included).
ACYCLIC = sorted(
    path.name for path in ROOT.iterdir() if path.is_dir() and (path / "__init__.py").exists()
)


# ------------------------------------------------------------------ the walker


@attrs.frozen
class Imported:
    """One import statement's target, resolved to an absolute module name."""

    module: str  # "pride.llm._tokens", "trio", ...
    names: tuple[str, ...]  # the names taken from it (``from m import a, b``); () for ``import m``
    type_only: bool  # under ``if TYPE_CHECKING:``
    line: int


def module_name(path: Path, root: Path = ROOT) -> str:
    """``pride/branch/branch.py`` -> ``pride.branch.branch`` (a package's face is its name)."""
    parts = path.relative_to(root.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path = ROOT) -> list[Imported]:
    """Every import in ``path``, wherever it is (module level, functions, TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    type_only: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            type_only.update(id(child) for stmt in node.body for child in ast.walk(stmt))
    own = module_name(path, root)
    package = own if path.name == "__init__.py" else own.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                module = ".".join([*base, *([node.module] if node.module else [])])
            else:
                module = node.module or ""
            names = tuple(alias.name for alias in node.names)
            found.append(Imported(module, names, id(node) in type_only, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                found.append(Imported(alias.name, (), id(node) in type_only, node.lineno))
    return found


def _layer(path: Path) -> str:
    relative = path.relative_to(ROOT)
    return relative.parts[0].removesuffix(".py") if len(relative.parts) > 1 else path.stem


def _modules_of(package: str, root: Path = ROOT) -> list[Path]:
    """Every module of ``pride.<package>``, its subpackages' too."""
    return sorted((root / package).rglob("*.py"))


def _imported_modules(package: str) -> set[str]:
    """Every module imported by a module of ``pride.<package>``."""
    return {imp.module for path in _modules_of(package) for imp in imports(path)}


def run_modules(importer: str, imp: Imported, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that the import ``imp`` in ``importer`` runs.

    ``from m import x`` runs the module ``m.x`` when x is one; when some name is
    not a module it is taken from ``m`` itself, a package's face, which imports
    everything it exports (so ``from pride.flows import Flow`` inside
    pride/flows/ is an import of the face). Importing ``a.b.c`` runs the faces
    ``a.b`` and ``a`` first, unless the importer is inside them (then they are
    already being imported: no edge).
    """
    named = {f"{imp.module}.{name}" for name in imp.names}
    submodules = named & modules
    targets = set(submodules)
    if imp.module in modules and (not imp.names or len(submodules) < len(named)):
        targets.add(imp.module)
    for target in list(targets):
        parts = target.split(".")
        for cut in range(1, len(parts)):
            face = ".".join(parts[:cut])
            inside = importer == face or importer.startswith(face + ".")
            if face in modules and not inside:
                targets.add(face)
    return targets - {importer}


def _graph(package: str, *, type_only: bool = True, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> modules of the same package its imports run (`run_modules`)."""
    prefix = f"pride.{package}"
    paths = _modules_of(package, root)
    modules = {module_name(path, root) for path in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        own = module_name(path, root)
        targets: set[str] = set()
        for imp in imports(path, root):
            if imp.type_only and not type_only:
                continue
            if imp.module == prefix or imp.module.startswith(prefix + "."):
                targets |= run_modules(own, imp, modules)
        graph[own] = targets
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every import cycle found by a depth-first walk (each reported once, from its start)."""
    found: list[list[str]] = []
    state: dict[str, str] = {}

    def visit(module: str, trail: list[str]) -> None:
        state[module] = "open"
        for target in sorted(graph.get(module, ())):
            if state.get(target) == "open":
                found.append([*trail[trail.index(target) :], target])
            elif target not in state:
                visit(target, [*trail, target])
        state[module] = "done"

    for module in sorted(graph):
        if module not in state:
            visit(module, [module])
    return found


# ------------------------------------------------------------------ layers


def test_imports_point_one_way() -> None:
    """Every import of a pride package (type-only too) goes to an allowed (lower) layer."""
    violations = []
    for path in sorted(ROOT.rglob("*.py")):
        layer = _layer(path)
        if layer in {"__init__", "__main__"} | HELPERS:
            continue
        allowed = ALLOWED.get(layer)
        assert allowed is not None, f"{path}: layer {layer!r} has no rule in this test"
        for imp in imports(path):
            parts = imp.module.split(".")
            if parts[0] != "pride" or len(parts) < 2:
                continue
            target = parts[1]
            if target != layer and target not in allowed:
                violations.append(f"{path.relative_to(ROOT)} imports pride.{target}")
    assert violations == []


def test_the_pride_wide_helpers_import_nothing_of_pride() -> None:
    """A helper at pride's top any layer may use sits below them all: it imports no
    module of pride (so a layer using it cannot reach another through it)."""
    offenders = [
        f"{name}.py: {imp.module}"
        for name in sorted(HELPERS)
        for imp in imports(ROOT / f"{name}.py")
        if imp.module.split(".")[0] == "pride"
    ]
    assert offenders == []


def test_actors_never_see_durable_turns() -> None:
    """The actor runtime declares what it needs of a journal and a commit
    (``pride.actors.journaling``, ``CommitHandover``); no module of it imports
    pride.durable, even for types."""
    assert {m for m in _imported_modules("actors") if m.startswith("pride.durable")} == set()


def test_operations_never_see_the_actor_runtime() -> None:
    """Operations receive a TurnView; no operation imports pride.actors, even for types."""
    assert {m for m in _imported_modules("operations") if m.startswith("pride.actors")} == set()


def test_no_asyncio_in_pride() -> None:
    """pride is trio-only, except the Ray host glue in pride/cluster/ (Ray's loop is asyncio)
    and pride/aio/, which runs pride as a guest of an asyncio loop."""
    offenders = [
        f"{path.relative_to(ROOT)}:{imp.line}"
        for path in ROOT.rglob("*.py")
        if _layer(path) not in {"cluster", "aio"}
        for imp in imports(path)
        if imp.module.split(".")[0] == "asyncio"
    ]
    assert offenders == []


def test_optional_extras_stay_in_their_folder() -> None:
    """ray is imported only inside pride/cluster/ (and asyncio too, for its host glue)."""
    offenders = [
        str(path.relative_to(ROOT))
        for path in ROOT.rglob("*.py")
        if _layer(path) != "cluster"
        and "ray" in {imp.module.split(".")[0] for imp in imports(path)}
    ]
    assert offenders == []


def test_messages_import_nothing_else_of_pride() -> None:
    """No module of pride/messages imports another pride package (nor trio/httpx)."""
    offenders = []
    for path in _modules_of("messages"):
        for imp in imports(path):
            inside = imp.module == "pride.messages" or imp.module.startswith("pride.messages.")
            if imp.module.split(".")[0] in {"pride", "trio", "httpx"} and not inside:
                offenders.append(f"{path.name}: {imp.module}")
    assert offenders == []


@pytest.mark.parametrize(
    ("package", "permitted"),
    [
        ("tools", ("pride.errors", "pride.messages")),
        ("memory", ("pride.errors", "pride.messages")),
        ("context", ("pride.errors", "pride.messages", "pride.llm")),
        ("llm", ("pride.errors", "pride.messages")),
        ("testing", ("pride.errors", "pride.llm", "pride.messages")),
    ],
)
def test_low_packages_import_only_what_is_below_them(
    package: str, permitted: tuple[str, ...]
) -> None:
    """tools and memory: errors and messages; context also counts tokens with llm; llm
    depends on errors and messages (a reply's reasoning is a conversation message,
    `pride.messages.reasoning`, the one type the codec keeps) and splits an event
    stream's lines with pride's one line splitter (``pride._lines``); testing uses
    llm (and errors and messages)."""
    inside = f"pride.{package}"
    offenders = {
        module
        for module in _imported_modules(package)
        if module.split(".")[0] == "pride"
        and not (module == inside or module.startswith(inside + "."))
        and not any(module == ok or module.startswith(ok + ".") for ok in permitted)
        and module != "pride._public"  # each package face names its public home with it
        and module != "pride._lines"  # llm's event-stream parser splits lines with it
    }
    assert offenders == set()


def test_import_pride_does_not_import_asyncio() -> None:
    """`import pride` loads neither asyncio nor pride.aio: only `import pride.aio` does."""
    import subprocess
    import sys

    code = (
        "import sys, pride; "
        "assert 'asyncio' not in sys.modules, 'asyncio imported'; "
        "assert 'pride.aio' not in sys.modules, 'pride.aio imported'; "
        "import pride.aio; assert 'asyncio' in sys.modules"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


def test_import_pride_does_not_import_ray() -> None:
    """`import pride` (and `import pride.cluster`) leave ray unimported: it is an optional extra."""
    import subprocess
    import sys

    code = "import sys, pride, pride.cluster; assert 'ray' not in sys.modules, 'ray imported'"
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr


# ------------------------------------------------------------------ circles


@pytest.mark.parametrize("package", ACYCLIC)
def test_no_import_circle_inside_the_package(package: str) -> None:
    """No module of the package imports, even only for type checking, one that imports it back.

    The package face (``__init__``) imports the private modules, so a private
    module importing the face counts as a circle too.
    """
    assert cycles(_graph(package)) == []


def test_the_layers_form_no_circle() -> None:
    """The allowed imports between packages point one way: with each package's own
    circles forbidden above, no import circle can run through two packages either."""
    layers = {layer: allowed - {layer} for layer, allowed in ALLOWED.items()}
    assert cycles(layers) == []


def test_no_run_time_import_circle_inside_actors() -> None:
    """actors/ may name Branch in annotations of lower modules, but nothing more."""
    assert cycles(_graph("actors", type_only=False)) == []


def test_the_circle_check_sees_type_only_and_local_imports(tmp_path: Path) -> None:
    """A circle closed only by a TYPE_CHECKING import and a function-local one is found."""
    package = tmp_path / "pride" / "fake"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from ._a import A as A\n")
    (package / "_a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ._b import B\nA = 1\n"
    )
    (package / "_b.py").write_text("def make():\n    from pride.fake._a import A\n")
    (package / "_c.py").write_text("import pride.fake\n")
    root = tmp_path / "pride"
    graph = {
        module_name(path, root): {
            imp.module
            for imp in imports(path, root)
            if imp.module.startswith("pride.fake") and imp.module != module_name(path, root)
        }
        for path in sorted(package.glob("*.py"))
    }
    assert graph == {
        "pride.fake": {"pride.fake._a"},
        "pride.fake._a": {"pride.fake._b"},
        "pride.fake._b": {"pride.fake._a"},
        "pride.fake._c": {"pride.fake"},
    }
    assert cycles(graph) == [["pride.fake._a", "pride.fake._b", "pride.fake._a"]]


def test_the_circle_check_sees_circles_through_package_faces(tmp_path: Path) -> None:
    """A name taken from the package's own face (beside a module: ``from . import
    util, High``) imports the face, and importing a module of another subpackage
    runs that subpackage's face first: circles closed only that way are found,
    and a module of a package importing its own subpackage's sibling is not one."""
    root = tmp_path / "pride"
    files = {
        "__init__.py": "",
        "fake/__init__.py": "from .high import High as High\n",
        "fake/util.py": "",
        "fake/low.py": (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from . import util, High\n"
        ),
        "fake/high.py": "from .low import thing\nfrom .util import tool\n",
        "fake/sub/__init__.py": "from .x import X as X\n",
        "fake/sub/x.py": "from ..other.y import Y\n",
        "fake/sub/z.py": "from .x import X\n",  # inside sub: its face is being imported
        "fake/other/__init__.py": "",
        "fake/other/y.py": "import pride.fake.sub.z\n",
    }
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    graph = _graph("fake", root=root)
    assert graph == {
        "pride.fake": {"pride.fake.high"},
        "pride.fake.high": {"pride.fake.low", "pride.fake.util"},
        "pride.fake.low": {"pride.fake", "pride.fake.util"},
        "pride.fake.other": set(),
        "pride.fake.other.y": {"pride.fake.sub", "pride.fake.sub.z"},
        "pride.fake.sub": {"pride.fake.sub.x"},
        "pride.fake.sub.x": {"pride.fake.other", "pride.fake.other.y"},
        "pride.fake.sub.z": {"pride.fake.sub.x"},
        "pride.fake.util": set(),
    }
    assert cycles(graph) == [
        ["pride.fake", "pride.fake.high", "pride.fake.low", "pride.fake"],
        ["pride.fake.other.y", "pride.fake.sub", "pride.fake.sub.x", "pride.fake.other.y"],
    ]


# ------------------------------------------------------------------ privates


def test_no_private_module_or_name_of_another_package_is_imported() -> None:
    """Each package uses the others through their public faces: no ``pride.x._module``,
    no ``from pride.x.y import _name`` from outside ``pride.x``."""
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        layer = _layer(path)
        for imp in imports(path):
            parts = imp.module.split(".")
            if parts[0] != "pride" or len(parts) < 2 or parts[1] == layer:
                continue
            private = [part for part in parts[1:] if part.startswith("_")]
            private += [name for name in imp.names if name.startswith("_")]
            if private and parts[1] not in HELPERS:
                offenders.append(f"{path.relative_to(ROOT)}:{imp.line}: {imp.module} {private}")
    assert offenders == []


def _defined_names(paths: Iterable[Path]) -> set[str]:
    """Every name a package defines as something an object or module of it can carry:
    attributes it assigns (``obj._x = ...``), functions, classes and names bound at
    module or class level, ``__slots__`` entries, and import aliases.

    A parameter, a local variable or a string elsewhere does not count: a module
    whose function takes ``_state`` may still not read ``other._state`` when only
    another package defines that attribute.
    """
    names: set[str] = set()
    for path in paths:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        bodies = [tree.body] + [
            node.body for node in ast.walk(tree) if isinstance(node, ast.ClassDef)
        ]
        for body in bodies:
            for stmt in body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    names.add(stmt.name)
                elif isinstance(stmt, ast.Assign | ast.AnnAssign | ast.AugAssign):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    for target in targets:
                        names.update(n.id for n in ast.walk(target) if isinstance(n, ast.Name))
                        if isinstance(target, ast.Name) and target.id == "__slots__" and stmt.value:
                            names.update(
                                c.value
                                for c in ast.walk(stmt.value)
                                if isinstance(c, ast.Constant) and isinstance(c.value, str)
                            )
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.alias):
                names.add((node.asname or node.name).split(".")[0])
    return names


def private_reaches(paths: list[Path], package_root: Path = ROOT) -> list[str]:
    """``obj._name`` reads and writes in ``paths`` whose ``_name`` no module of the
    same pride package defines: a reach into another package's privates.

    ``self._x``/``cls._x`` are the object's own; a stdlib or third-party module's
    underscore names (``os._exit``) are not pride's business here.
    """
    by_package: dict[str, list[Path]] = collections.defaultdict(list)
    for path in package_root.rglob("*.py"):
        relative = path.relative_to(package_root)
        by_package[relative.parts[0] if len(relative.parts) > 1 else ""].append(path)
    defined = {package: _defined_names(files) for package, files in by_package.items()}
    found = []
    for path in paths:
        relative = path.relative_to(package_root)
        package = relative.parts[0] if len(relative.parts) > 1 else ""
        tree = ast.parse(path.read_text(encoding="utf-8"))
        foreign_modules = {
            (alias.asname or alias.name).split(".")[0]
            for node in ast.walk(tree)
            if isinstance(node, ast.Import)
            for alias in node.names
            if alias.name.split(".")[0] != "pride"
        }
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute):
                continue
            name = node.attr
            if not name.startswith("_") or name.startswith("__"):
                continue
            owner = node.value
            if isinstance(owner, ast.Name) and owner.id in {"self", "cls", *foreign_modules}:
                continue
            if name not in defined[package]:
                found.append(f"{relative}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_module_reaches_into_another_packages_private_attributes() -> None:
    """No module reads or writes ``obj._name`` where ``_name`` belongs to another package."""
    assert private_reaches(sorted(ROOT.rglob("*.py"))) == []


def test_the_private_reach_check_sees_a_reach(tmp_path: Path) -> None:
    """The check flags an attribute only another package defines, and nothing else."""
    root = tmp_path / "pkg"
    (root / "low").mkdir(parents=True)
    (root / "high").mkdir()
    (root / "low" / "thing.py").write_text(
        "class Thing:\n    def __init__(self):\n        self._state = 1\n"
    )
    (root / "high" / "user.py").write_text(
        "import os\n"
        "class User:\n"
        "    def __init__(self):\n        self._mine = 2\n"
        "    def use(self, thing, other, _state=None):\n"
        "        other._mine = 3\n"  # an attribute this package defines: allowed
        "        os._exit\n"  # the standard library's: not this check's business
        "        _kind = '_kind'\n"  # a local and a string of that name define nothing
        "        thing._kind\n"  # so this is a reach too
        "        return thing._state\n"  # another package's, though a parameter shares its name
    )
    paths = sorted(root.rglob("*.py"))
    assert private_reaches(paths, root) == [
        "high/user.py:9: thing._kind",
        "high/user.py:10: thing._state",
    ]
