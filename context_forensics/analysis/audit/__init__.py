"""Audit: rules over sessions, the runner and its executors, JSON / JUnit / Markdown reports.

- ``rules``: one function per rule and the ``RULES`` table; ``Result`` is what a rule returns;
- ``runner``: ``audit_session`` (one session, a pure function of its inputs) and
  ``audit_many`` (many sessions, the task-level divergences, the exit code);
- ``executors``: ``run_serial`` for an in-memory store (the rest: ``context_forensics.executors``);
- ``distributed`` (the driver) and ``tasks`` (a worker's task): an audit of files on an executor;
- ``inputs``: ``unreadable_inputs``, the walked files an audit could not read;
- ``reports``: ``junit_xml`` and ``markdown``, built from ``audit_many``'s JSON report.

>>> from context_forensics.analysis.audit import audit_many, junit_xml
>>> report = audit_many("sessions.db", ids, config, rules)   # report["exit_code"]: 0, 1 or 3
"""

from .executors import default_workers, run_serial
from .inputs import LOG_SUFFIXES, unreadable_inputs
from .reports import junit_xml, markdown
from .rules import RULES, Ctx, Result, run_rule
from .runner import AUDIT_VERSION, audit_many, audit_session

__all__ = [
    "AUDIT_VERSION", "LOG_SUFFIXES", "RULES", "Ctx", "Result", "audit_many", "audit_session", "default_workers",
    "junit_xml", "markdown", "run_rule", "run_serial", "unreadable_inputs",
]
