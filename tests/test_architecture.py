"""The layering DESIGN.md promises: a pure core, a thin CLI, heavy imports only where needed."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).parent.parent / "context_forensics"
def _is_ui(path: Path) -> bool:
    """The CLI and rendering layer: the cli/ and render/ packages."""
    return path.relative_to(PKG).parts[0] in ("cli", "render")
HEAVY = {"torch", "sentence_transformers", "transformers", "matplotlib"}


def _imports(path: Path) -> list[tuple[str, int, bool]]:
    """(module, line, at_module_level) for every import in a file."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name.split(".")[0], node.lineno, id(node) in top) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module.split(".")[0], node.lineno, id(node) in top))
    return out


def test_only_cli_and_render_modules_import_typer_or_rich():
    offenders = [
        f"{p.relative_to(PKG)}:{line} imports {mod}"
        for p in PKG.rglob("*.py") if not _is_ui(p)
        for mod, line, _ in _imports(p) if mod in ("typer", "rich", "click")
    ]
    assert offenders == []


def test_heavy_libraries_are_never_imported_at_module_level():
    offenders = [
        f"{p.relative_to(PKG)}:{line} imports {mod} at module level"
        for p in PKG.rglob("*.py")
        for mod, line, top in _imports(p) if mod in HEAVY and top
    ]
    assert offenders == []
