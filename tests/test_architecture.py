"""The layering docs/design.md promises, read from the source: packages that follow the data flow,
no import cycles (between packages, or between the modules of one package, lazy imports
included), a pure core, a thin CLI, heavy imports only where needed, modules of one job."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).parent.parent / "context_forensics"
NAME = PKG.name
HEAVY = {"torch", "sentence_transformers", "transformers", "matplotlib", "ray"}
MAX_LINES = 600
# The flow of docs/design.md: each package may import only packages listed before it (its own
# layer excepted). `tool_output` and `version` are single-module rooms of the core vocabulary.
LAYERS = (
    # environ: environment switches set for a block only
    {"version", "errors", "hashing", "inert", "analysis", "plugins",
     "environ"},  # analysis/__init__: a docstring, no imports; plugins: the registries
    {"records"},
    # export: a stored session written out (ATIF, OpenAI messages, ctxf jsonl), from records alone
    {"tool_output", "config", "matching", "executors",
     "export"},  # matching: text rules of facts and pins; executors: serial, process, Ray
    {"importers"},
    {"store"},
    {"tokens"},
    {"replay", "embed"},
    {"facts"},
    {"drift", "diverge"},
    # explain: the diagnosis of a failed run; check: the log against the reconstruction (`ctxf check`);
    # both read replay, facts and diverge
    {"explain", "check"},
    {"audit"},
    {"api"},
    {"render"},
    {"cli"},
    {"(package)", "__main__", "pytest_plugin"},  # pytest_plugin: the pytest11 entry point
)


def _modules(pkg: Path = PKG) -> dict[str, Path]:
    out = {}
    for p in pkg.rglob("*.py"):
        parts = list(p.relative_to(pkg.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = p
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(top-level name, line, at module level) of every absolute import in a file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module.split(".")[0], node.lineno, id(node) in top))
    return out


def _edges(modules: dict[str, Path] = MODULES, name: str = NAME) -> dict[str, set[str]]:
    """module -> the package modules it imports, at module level or inside a function (a lazy
    import is still a dependency). ``from .pkg import name`` depends on ``pkg`` (its __init__)
    and on ``pkg.name`` when that is a module; ``from . import sub`` only on ``sub``."""
    edges: dict[str, set[str]] = {}
    for mod, path in modules.items():
        package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith(name):
                    continue
                subs = [f"{target}.{a.name}" for a in node.names]
                found = [s for s in subs if s in modules]
                if node.module or len(found) < len(subs):
                    found.append(target)
                deps.update(d for d in found if d in modules and d != mod)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name in modules and a.name != mod)
        edges[mod] = deps
    return edges


EDGES = _edges()


def _room(mod: str) -> str:
    """The package a module belongs to: ``replay`` for ``context_forensics.analysis.replay.engine``
    (the analyses are rooms of their own inside ``analysis/``), ``(package)`` for the root."""
    parts = mod.split(".")
    if len(parts) > 2 and parts[1] == "analysis":
        return parts[2]
    return parts[1] if len(parts) > 1 else "(package)"


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as a path, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(v: str) -> list[str] | None:
        state[v] = 1
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if state.get(w) == 1:
                return stack[stack.index(w):] + [w]
            if w not in state and (found := visit(w)):
                return found
        stack.pop()
        state[v] = 2
        return None

    for v in sorted(graph):
        if v not in state and (found := visit(v)):
            return found
    return None


def test_the_package_graph_follows_the_data_flow():
    layer = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}
    rooms = {_room(m) for m in MODULES}
    assert rooms <= set(layer), f"a room not placed in LAYERS: {sorted(rooms - set(layer))}"
    upward = sorted(
        f"{m} -> {d}" for m, deps in EDGES.items() for d in deps
        if _room(m) != _room(d) and layer[_room(d)] >= layer[_room(m)]
    )
    assert upward == [], "imports against the flow (or across one layer):\n" + "\n".join(upward)


def test_the_package_graph_is_acyclic():
    graph: dict[str, set[str]] = {}
    for m, deps in EDGES.items():
        graph.setdefault(_room(m), set()).update(_room(d) for d in deps if _room(d) != _room(m))
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


@pytest.mark.parametrize("room", sorted({_room(m) for m in MODULES}))
def test_the_modules_of_each_package_import_each_other_without_a_cycle(room):
    inside = {m: {d for d in deps if _room(d) == room} for m, deps in EDGES.items() if _room(m) == room}
    assert _cycle(inside) is None, " -> ".join(_cycle(inside) or [])


def test_only_cli_and_render_import_typer_or_rich():
    offenders = [
        f"{p.relative_to(PKG)}:{line} imports {mod}"
        for p in PKG.rglob("*.py") if p.relative_to(PKG).parts[0] not in ("cli", "render")
        for mod, line, _ in _imports(p) if mod in ("typer", "rich", "click")
    ]
    assert offenders == []


def test_no_module_imports_a_private_module_of_another_package():
    """``typer._click`` and the like change without notice: only their public names are used, but
    for the one listed here with its reason."""
    allowed = {"ray._raylet"}  # Ray's token auth is re-read as Ray's own _enable_token_auth does it: no public API
    offenders = []
    for p in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else []
            offenders += [f"{p.relative_to(PKG)}:{node.lineno} imports {n}" for n in names
                          if n.split(".")[0] != "context_forensics" and any(part.startswith("_") and
                                                                           not part.startswith("__")
                                                                           for part in n.split(".")[1:])
                          and n not in allowed]
    assert offenders == []


def test_heavy_libraries_are_never_imported_at_module_level():
    offenders = [
        f"{p.relative_to(PKG)}:{line} imports {mod} at module level"
        for p in PKG.rglob("*.py")
        for mod, line, top in _imports(p) if mod in HEAVY and top
    ]
    assert offenders == []


def test_no_module_is_over_600_lines():
    sizes = {str(p.relative_to(PKG)): len(p.read_text().splitlines()) for p in PKG.rglob("*.py")}
    over = sorted((n, s) for n, s in sizes.items() if s > MAX_LINES)
    assert over == [], f"modules over {MAX_LINES} lines (split them by responsibility): {over}"


def test_the_checker_sees_cycles_through_lazy_imports(tmp_path):
    """The graph tests would pass on a tree they cannot read: check that they find a cycle
    made only of a function-level import, and the edges of each import form."""
    pkg = tmp_path / "toy"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from .leaf import thing\n")
    (pkg / "sub" / "leaf.py").write_text("def thing():\n    from ..core import f\n    return f\n")
    (pkg / "core.py").write_text("from .sub import thing\nfrom . import util\n")
    (pkg / "util.py").write_text("X = 1\n")
    edges = _edges(_modules(pkg), "toy")
    assert edges["toy.core"] == {"toy.sub", "toy.util"}
    assert edges["toy.sub.leaf"] == {"toy.core"}  # the lazy import counts
    assert _cycle(edges) is not None
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None
