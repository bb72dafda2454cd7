"""Eviction policies: one module each, registered by name (see base.py for the contract)."""

from __future__ import annotations

from ....plugins import import_modules
from .base import (
    CLEARED,
    EVICTED,
    IN_WINDOW,
    KEPT,
    NOT_YET,
    OUTSIDE_LOCAL,
    STATE_NAMES,
    SUMMARIZED,
    Engine,
    Policy,
    ReplayInput,
    StepResult,
    is_compaction,
    load_plugins,
    register_policy,
    registered,
    rewrites_only,
)

_loaded = False


def _load_all() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    import_modules(__name__, __path__)
    load_plugins()  # third-party policies (entry points ``ctxf.policies``), after the built-in ones


def policies() -> dict[str, Policy]:
    _load_all()
    return registered()


def get_policy(name: str) -> Policy:
    found = policies()
    if name not in found:
        from ....errors import UsageError

        raise UsageError(f"unknown policy {name!r}", hint="known policies: " + ", ".join(found))
    return found[name]


__all__ = [
    "CLEARED", "EVICTED", "IN_WINDOW", "KEPT", "NOT_YET", "OUTSIDE_LOCAL", "STATE_NAMES", "SUMMARIZED",
    "Engine", "Policy", "ReplayInput", "StepResult", "get_policy", "is_compaction", "policies", "register_policy",
    "rewrites_only",
]
