"""Registries of importers and replay policies, and the third-party ones found by entry point.

One helper, ``Registry``, holds the built-in importers (``importers.base.register``) and policies
(``analysis.replay.policies.base.register_policy``) by name. When a registry is first read
(``importers.registry()``, ``policies.policies()``: never at ``ctxf --help``) it loads the
installed packages' entry points of its group, once: ``ctxf.importers`` and ``ctxf.policies``.
An entry point names a module (importing it registers its classes with ``@register`` /
``@register_policy``) or a class (registered here). A plugin that fails to load (an import
error, a name already taken, a class of the wrong kind) is one warning on stderr naming the
plugin and why; ctxf goes on without it.
"""

from __future__ import annotations

import sys
from typing import Callable, Generic, Iterable, TypeVar

T = TypeVar("T")

GROUPS = {"importer": "ctxf.importers", "policy": "ctxf.policies"}
_problems: list[str] = []  # the warnings given, for ``problems()``


class Registry(Generic[T]):
    """Objects by name, each registered once; ``group``'s entry points loaded on first ``load``."""

    def __init__(self, kind: str, group: str) -> None:
        self.kind, self.group = kind, group
        self.items: dict[str, T] = {}
        self._plugins_loaded = False

    def add(self, name: object, obj: T) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a {self.kind} needs a name")
        if name in self.items:
            raise ValueError(f"{self.kind} {name!r} registered twice")
        self.items[name] = obj

    def load_plugins(self, adopt: Callable[[object], None]) -> None:
        """Load this group's entry points once; ``adopt`` registers a class an entry point names."""
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        from importlib.metadata import entry_points

        try:
            found = list(entry_points(group=self.group))
        except Exception as e:  # noqa: BLE001 - broken package metadata: no plugins, said once
            _warn(f"cannot list the {self.group} entry points ({type(e).__name__}: {e}); no {self.kind} plugin loaded")
            return
        for ep in found:
            dist = getattr(getattr(ep, "dist", None), "name", None)
            label = f"{ep.name!r} ({ep.value}{f', from {dist}' if dist else ''})"
            try:
                obj = ep.load()
                if isinstance(obj, type):
                    adopt(obj)
            except Exception as e:  # noqa: BLE001 - a plugin's own defect never stops ctxf
                _warn(f"{self.kind} plugin {label} failed to load: {type(e).__name__}: {e}; "
                      "ctxf goes on without it")


def import_modules(package: str, path: Iterable[str]) -> None:
    """Import every module of ``package`` (its ``__path__``) but ``base`` and ``_private`` ones:
    the built-in importers and policies register themselves when imported."""
    import importlib
    import pkgutil

    for mod in pkgutil.iter_modules(path):
        if not mod.name.startswith("_") and mod.name != "base":
            importlib.import_module(f"{package}.{mod.name}")


def _warn(message: str) -> None:
    _problems.append(message)
    print(f"warning: {message}", file=sys.stderr)


def problems() -> list[str]:
    """The plugin warnings given so far in this process."""
    return list(_problems)


__all__ = ["GROUPS", "Registry", "import_modules", "problems"]
