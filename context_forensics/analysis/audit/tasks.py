"""One task of a distributed audit, as a worker runs it: read its files into a private store,
audit each session, return the results (and what the driver keeps).

A task is a pure function of its ``AuditJob``: the worker opens a private in-memory store (no
SQLite file is shared between workers), ingests the job's units into it (the same importers and
redaction as ``ctxf ingest``), runs ``audit_in`` on each of their sessions, and returns an
``AuditTaskResult``: the ingest's file results, one result per session with the key that puts
it in store order, the parsed units when the driver stores the sessions (``--db``) or needs
them for a task's divergence report, and the embedding vectors the worker encoded, which go
back to the driver's cache. On a miss the worker's cache reads the driver's store file
read-only when it can open it (the same machine: ``serial``, ``process``, a local Ray), so a
second run encodes nothing.
"""

from __future__ import annotations

import os
import socket
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from ...config.audit_rules import RuleConfig
from ...config.schema import Config


@dataclass
class AuditJob:
    """What a worker needs for one task; pickles (it crosses process and Ray boundaries)."""

    units: list[Any]  # store.sources.Source (or store.ingest.Unit): the files of this task
    config: Config
    rules: list[RuleConfig]
    task: str | None = None  # only the sessions of this task
    redact: Any = True  # bool or a Redactor, as for ``ctxf ingest``
    keep: bool = False  # return every parsed unit (the driver stores the sessions)
    keep_paired: bool = False  # return the parsed units holding a session with a task and an outcome
    cache: str | None = None  # the driver's store file: its embedding cache, read-only
    # drift's template indexes over every session of the run (``openings_job``, merged by the
    # driver): a private store holds only this task's sessions
    templates: dict | None = None


@dataclass
class AuditTaskResult:
    files: list[dict[str, Any]] = field(default_factory=list)  # FileResult.to_dict(), in unit order
    ignored: list[str] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)  # audit_in results
    order: list[tuple] = field(default_factory=list)  # each session's store-order key
    # each session's (format, external id, content hash) when it has messages: the same run read
    # through another path in another task is one session, as in one store (``Store.same_run``)
    runs: list[tuple | None] = field(default_factory=list)
    parsed: list[Any] = field(default_factory=list)  # ParsedUnit, when kept
    vectors: list[tuple] = field(default_factory=list)  # EmbeddingCache.new_rows()
    seconds: dict[str, float] = field(default_factory=dict)  # ingest, audit
    worker: dict[str, Any] = field(default_factory=dict)  # host, pid
    cache_reachable: bool = False  # the driver's cache could be read from this worker


def order_key(session: dict[str, Any]) -> tuple:
    """A session's place in the audit's report: the store's order (``Store.sessions``), from the
    session alone, so every executor gives it: a dated session by its start, then id; an undated
    one after every dated one, by id."""
    started = session.get("started_at")
    return (0, started, session["id"]) if started else (1, "", session["id"])


def run_audit_job(job: AuditJob) -> AuditTaskResult:
    """Ingest the job's units into a private store, audit their sessions, return the results."""
    from ...embed.cache import EmbeddingCache, shared_cache
    from ...store.db import Store
    from .runner import audit_in

    out = AuditTaskResult(worker={"host": socket.gethostname(), "pid": os.getpid()})
    with tempfile.TemporaryDirectory(prefix="ctxf-task-") as tmp, Store.open(":memory:") as store, \
            shared_cache(job.cache) as shared:
        out.cache_reachable = shared.reachable
        t0 = time.perf_counter()
        produced: dict[str, int] = {}  # session id -> the position of the unit that produced it
        for pos, unit in enumerate(job.units):
            res, parsed = _ingest_one(store, unit, job, tmp)
            out.files.append(res)
            for sid in res.get("sessions", []):
                produced.setdefault(sid, pos)
            if parsed is not None and (job.keep or (job.keep_paired and _paired(parsed))):
                out.parsed.append(parsed)
        t1 = time.perf_counter()
        from ..drift.templates import fixed_templates

        rows = {s["id"]: s for s in store.sessions(task=job.task)}
        keys = {sid: order_key(rows[sid]) for sid in produced if sid in rows}
        for sid in sorted(keys, key=keys.__getitem__):
            later = deferred_rules(rows[sid], job.rules)
            rules = [r for r in job.rules if r.name not in later]
            with fixed_templates(job.templates):
                res = audit_in(store, sid, job.config, rules)
            if later:  # in the rules' order, a placeholder the driver replaces
                done = iter(res["results"])
                res["results"] = [DEFERRED | {"rule": r.name} if r.name in later else next(done) for r in job.rules]
            out.sessions.append(res)
            out.order.append(keys[sid])
            row = rows[sid]
            out.runs.append((row["format"], row.get("external_id"), row.get("content_hash"))
                            if row.get("message_count") and row.get("content_hash") else None)
        out.vectors = EmbeddingCache(store).new_rows()
        out.seconds = {"ingest": round(t1 - t0, 4), "audit": round(time.perf_counter() - t1, 4)}
    return out


# Rules whose verdict on a session reads other sessions of its task (``explain`` compares a failed
# run with the task's success): run by the driver, on the store that holds every such session.
CROSS_SESSION_RULES = ("context_caused_failure",)
DEFERRED: dict[str, Any] = {"status": "deferred", "figure": None, "step": None, "message": "judged by the driver",
            "detail": {}, "assumed": None}


def deferred_rules(session: dict[str, Any], rules: list[RuleConfig]) -> set[str]:
    """The rules a worker leaves to the driver for this session: a cross-session rule on a failed
    run of a task (whose success may be in another task's store)."""
    if not session.get("task") or session.get("outcome") != "failure":
        return set()
    return {r.name for r in rules if r.name in CROSS_SESSION_RULES}


def openings_job(job: AuditJob) -> dict[tuple[str, bool], dict[int, set[int]]]:
    """The first pass of a run with drift rules: ingest the job's units into a private store and
    return, per (format, keyed), the template groups of its sessions' openings (``drift.templates``),
    for the driver to merge over the whole run."""
    from ...store.db import Store
    from ..drift.templates import template_groups

    out: dict[tuple[str, bool], dict[int, set[int]]] = {}
    lite = AuditJob(job.units, job.config, job.rules, redact=job.redact)
    with tempfile.TemporaryDirectory(prefix="ctxf-task-") as tmp, Store.open(":memory:") as store:
        for unit in job.units:
            _ingest_one(store, unit, lite, tmp)
        fmts = {r[0] for r in store.db.execute("SELECT DISTINCT format FROM sessions").fetchall()}
        for fmt in fmts:
            for keyed in (False, True):
                out[(fmt, keyed)] = template_groups(store, fmt, keyed)
    return out


def _paired(parsed: Any) -> bool:
    return any(getattr(s, "task", None) and getattr(s, "outcome", None) in ("success", "failure")
               for s in getattr(parsed, "sessions", ()))


def _ingest_one(store: Any, source: Any, job: AuditJob, tmp: str) -> tuple[dict[str, Any], Any]:
    """(the source's FileResult as a dict, its ParsedUnit when the driver wants it, else None).

    A URL is read from a private copy and recorded under its URL (``sources.ingest_source``).
    When the driver keeps the sessions, the unit is parsed once (``ingest.parse_unit``), written
    into the private store and returned as it is, for the driver to write into its own."""
    from ...store import ingest as ing
    from ...store.sources import fetch, ingest_source
    from ...store.units import shown

    if not (job.keep or job.keep_paired) or source.problem is not None or source.stream:
        return ingest_source(store, source, tmpdir=tmp, redact=job.redact).to_dict(), None
    from ... import importers
    from ...errors import CtxfError

    try:
        local = fetch(source, tmp)
    except CtxfError as e:
        res = ing.FileResult(path=source.url, status="failed", error=str(e), exit_code=int(e.exit_code))
        return shown(res, job.redact).to_dict(), None
    if source.local is not None:
        unit = source.to_unit()
    else:
        unit = ing.Unit(local, importers.get(source.importer) if source.importer else None, source.explicit)
    parsed = ing.parse_unit(unit, redact=job.redact, source=None if source.local is not None else source.url)
    res = ing.write_parsed(store, parsed, unit=unit)
    res.path = source.url
    return shown(res, job.redact).to_dict(), parsed
