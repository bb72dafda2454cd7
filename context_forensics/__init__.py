"""ctxf: offline forensics for recorded LLM session logs.

The public Python API (``api/``): ``open_store``, ``ingest``, ``discover``, ``replay``, ``window``,
``facts``, ``drift``, ``diverge``, ``divergences``, ``audit``, ``view``, ``explain``, ``compare_policies`` and ``check``, each returning a dataclass whose
``to_dict()`` is the matching command's ``--json``. ``help(context_forensics.api)`` is the
reference; the README's "Python API" section has a worked example.
"""

from .api import (
    AuditResult, CheckResult, CompareResult, ConfigLike, DiscoverResult, DivergeResult, DivergencesResult, DriftResult, ExplainResult,
    FactsResult, IngestResult, ReplayResult, ViewResult, WindowResult, Workspace, audit, check, discover, diverge,
    compare_policies, divergences, drift, explain, facts, ingest, open_store, replay, view, window,
)
from .version import __version__

__all__ = [
    "__version__", "open_store", "ingest", "discover", "replay", "window", "facts", "drift", "diverge",
    "divergences", "audit", "view", "explain", "Workspace", "ConfigLike", "IngestResult", "DiscoverResult", "ReplayResult",
    "WindowResult", "FactsResult", "DriftResult", "DivergeResult", "DivergencesResult", "AuditResult",
    "ViewResult", "ExplainResult", "compare_policies", "CompareResult", "check", "CheckResult",
]
