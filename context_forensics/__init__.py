"""ctxf: offline forensics for recorded LLM session logs.

The public Python API (``api/``): ``open_store``, ``ingest``, ``discover``, ``replay``, ``window``,
``facts``, ``drift``, ``diverge``, ``divergences``, ``audit``, ``view``, ``explain``, ``compare_policies`` and
``check``, each returning a dataclass whose ``to_dict()`` is the matching command's ``--json``.
``help(context_forensics.api)`` is the reference; docs/api.md (the "Python API" page) has a worked example.
"""

from typing import TYPE_CHECKING

from .api import (
    AuditResult,
    CheckResult,
    CompareResult,
    ConfigLike,
    DiscoverResult,
    DivergencesResult,
    DivergeResult,
    DriftResult,
    ExplainResult,
    FactsResult,
    IngestResult,
    ReplayResult,
    ViewResult,
    WindowResult,
    Workspace,
    audit,
    check,
    compare_policies,
    discover,
    diverge,
    divergences,
    drift,
    explain,
    facts,
    ingest,
    open_store,
    replay,
    view,
    window,
)
from .version import __version__

if TYPE_CHECKING:  # what __getattr__ below loads, named for type checkers (`X as X`: a re-export)
    from .analysis.replay.policies.base import Policy as Policy, register_policy as register_policy
    from .importers.base import ImportContext as ImportContext, Importer as Importer, register as register
    from .records import Message as Message, Session as Session, ToolCall as ToolCall, Usage as Usage

# Writing an importer or a policy (docs/formats.md, "Writing an importer"): the base classes, the decorators
# and the record types, loaded when first named (``import context_forensics`` stays light).
_PLUGIN_API = {
    "Importer": "importers.base", "register": "importers.base", "ImportContext": "importers.base",
    "Message": "records", "ToolCall": "records", "Usage": "records", "Session": "records",
    "Policy": "analysis.replay.policies.base", "register_policy": "analysis.replay.policies.base",
}


def __getattr__(name: str) -> object:
    if name in _PLUGIN_API:
        import importlib

        value = getattr(importlib.import_module(f".{_PLUGIN_API[name]}", __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = [
    "__version__", "open_store", "ingest", "discover", "replay", "window", "facts", "drift", "diverge",
    "divergences", "audit", "view", "explain", "Workspace", "ConfigLike", "IngestResult", "DiscoverResult",
    "ReplayResult",
    "WindowResult", "FactsResult", "DriftResult", "DivergeResult", "DivergencesResult", "AuditResult",
    "ViewResult", "ExplainResult", "compare_policies", "CompareResult", "check", "CheckResult",
    *_PLUGIN_API,
]
