"""The Python API: the commands of the CLI as plain functions, for notebooks and test suites.

    import context_forensics as ctxf

    with ctxf.open_store() as ws:   # the CLI's store (`ctxf config show` says which), or open_store("x.db")
        rep = ctxf.replay("run.jsonl", model="gemma-7b", store=ws)   # a path is ingested on the fly
        print(rep.replay.summary["first_loss_step"])

Every call takes session references (an id, a unique id prefix, or a log file path) and either
``store=`` (a ``Workspace`` from ``open_store``) or ``db=`` / ``config=``; it returns a
dataclass whose ``to_dict()`` is exactly what the command prints with ``--json``:

====================  ====================================  ==================================
call                  returns                               command
====================  ====================================  ==================================
``open_store``        ``Workspace`` (config + store)        ``--db`` / ``--config``
``ingest``            ``IngestResult``                      ``ctxf ingest`` (``--discover``)
``discover``          ``DiscoverResult``                    ``ctxf ingest --discover --dry-run``
``replay``            ``ReplayResult``                      ``ctxf replay``
``window``            ``WindowResult``                      ``ctxf replay --at STEP``
``facts``             ``FactsResult``                       ``ctxf facts``
``drift``             ``DriftResult``                       ``ctxf drift``
``diverge``           ``DivergeResult``                     ``ctxf diverge A B`` / ``--task``
``divergences``       ``DivergencesResult``                 ``ctxf diverge --all-tasks``
``audit``             ``AuditResult``                       ``ctxf audit``
``view``              ``ViewResult``                        ``ctxf view`` (the page's data)
``explain``           ``ExplainResult``                     ``ctxf explain``
``compare_policies``  ``CompareResult``                     ``ctxf replay --compare-policies``
``check``             ``CheckResult``                       ``ctxf check``
``export``            ``ExportResult`` (``.text``)          ``ctxf export``
====================  ====================================  ==================================

Errors are ``context_forensics.errors.CtxfError`` subclasses (``UsageError``, ``NotFoundError``,
``ConfigError``, ...), each with the ``exit_code`` the CLI exits with. Nothing here opens a
socket; the embedding model and the tokenizers load from installed packages.
"""

from .calls import audit, discover, diverge, divergences, drift, facts, ingest, replay, window
from .check import CheckResult, check
from .compare import CompareResult, compare_policies
from .explain import ExplainResult, explain
from .export import ExportResult, export
from .results import (
    AuditResult,
    DiscoverResult,
    DivergencesResult,
    DivergeResult,
    DriftResult,
    FactsResult,
    IngestResult,
    ReplayResult,
    WindowResult,
)
from .view import ViewResult, view
from .workspace import ConfigLike, Workspace, open_store

__all__ = [
    "open_store", "ingest", "discover", "replay", "window", "facts", "drift", "diverge", "divergences", "audit", "view",
    "explain",
    "compare_policies", "check", "export",
    "Workspace", "ConfigLike", "IngestResult", "DiscoverResult", "ReplayResult", "WindowResult", "FactsResult",
    "DriftResult", "DivergeResult", "DivergencesResult", "AuditResult", "ViewResult", "ExplainResult",
    "CompareResult", "CheckResult", "ExportResult",
]
