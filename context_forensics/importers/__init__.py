"""Importers: one module per log format, found through a registry.

``detect(path)`` asks each importer's ``sniff`` in priority order; ``--format`` skips it.
"""

from __future__ import annotations

import importlib
import pkgutil
from pathlib import Path

from ..errors import UnknownFormatError
from .base import ImportContext, Importer, read_head, register, registered

_loaded = False


def _load_all() -> None:
    """Import every format module in this package so each registers itself."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    for mod in pkgutil.iter_modules(__path__):
        if not mod.name.startswith("_") and mod.name != "base":
            importlib.import_module(f"{__name__}.{mod.name}")


def registry() -> dict[str, Importer]:
    """All importers by name, in detection order."""
    _load_all()  # imports every format module once; each registers itself
    return registered()


def format_names() -> list[str]:
    return list(registry())


def get(name: str) -> Importer:
    formats = registry()
    if name not in formats:
        raise UnknownFormatError(
            f"unknown format {name!r}",
            hint="known formats: " + ", ".join(formats),
        )
    return formats[name]


def detect(path: Path, head: bytes | None = None) -> Importer | None:
    """The first importer whose sniff accepts ``path``, or None."""
    if head is None:
        head = read_head(path)
    for imp in registry().values():
        if path.is_dir() and not imp.handles_directories:
            continue
        try:
            if imp.sniff(path, head):
                return imp
        except (OSError, ValueError):
            continue
    return None


def unknown_format(path: Path) -> UnknownFormatError:
    return UnknownFormatError(
        "cannot tell which log format this is",
        where=str(path),
        hint="force one with --format NAME; known formats: " + ", ".join(format_names()),
    )


__all__ = [
    "ImportContext",
    "Importer",
    "detect",
    "format_names",
    "get",
    "register",
    "registry",
    "unknown_format",
]
