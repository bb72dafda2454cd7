"""ctxf: offline forensics for recorded LLM session logs.

The public Python API (``api/``): ``open_store``, ``ingest``, ``replay``, ``window``, ``facts``,
``drift``, ``diverge``, ``divergences`` and ``audit``, each returning a dataclass whose
``to_dict()`` is the matching command's ``--json``. ``help(context_forensics.api)`` is the
reference; the README's "Python API" section has a worked example.
"""

from .api import (
    AuditResult, ConfigLike, DivergeResult, DivergencesResult, DriftResult, FactsResult, IngestResult,
    ReplayResult, WindowResult, Workspace, audit, diverge, divergences, drift, facts, ingest, open_store, replay,
    window,
)
from .version import __version__

__all__ = [
    "__version__", "open_store", "ingest", "replay", "window", "facts", "drift", "diverge", "divergences",
    "audit", "Workspace", "ConfigLike", "IngestResult", "ReplayResult", "WindowResult", "FactsResult",
    "DriftResult", "DivergeResult", "DivergencesResult", "AuditResult",
]
