"""The API calls: what each command does, without the printing.

Every call takes session references (an id, a unique id prefix, or a log file path, ingested
on the fly) and either ``store=`` (a ``Workspace`` from ``open_store``, left open) or
``db=`` / ``config=`` (a store opened for the call, as the CLI's ``--db`` / ``--config``).
Errors are ``CtxfError`` subclasses (``errors.py``) whose ``exit_code`` is the CLI's.
``progress`` callbacks receive ``(done, total)`` (ingest: ``(path, done, total)``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Protocol

from .checks import on_disk
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
from .workspace import ConfigLike, Models, Workspace, model_list, recorded_unless, session_json, using

Progress = Callable[..., None]


class RunUpdates(Protocol):
    """An audit of paths reports its run as figures to an object with this ``update`` (the CLI's
    ``render.progress.RunProgress``), in place of a ``(done, total)`` callback."""

    def update(self, *, files_done: int, files_total: int, sessions: int, failures: int = ...,
               retries: int = ...) -> None: ...


def ingest(paths: str | Path | Iterable[str | Path] = (), *, fmt: str | None = None, recursive: bool = False,
           task: str | None = None, outcome: str | None = None, table: str | None = None,
           force: bool = False, store: Workspace | None = None, db: str | Path | None = None,
           config: ConfigLike = None, progress: Progress | None = None, redact: bool | None = None,
           discover: bool = False, agents: str | Iterable[str] | None = None,
           env: Mapping[str, str] | None = None, cwd: str | Path | None = None, executor: str | None = None,
           workers: int | None = None, ray_address: str | None = None) -> IngestResult:
    """Load log files or folders into the store (``ctxf ingest``).

    Never raises for a bad file: it is a ``failed`` row of the result (``exit_code`` says how
    bad). Re-ingesting an unchanged file adds nothing (``unchanged``); ``force`` re-reads it.
    ``task`` / ``outcome`` (success, failure, unknown) label every session read. ``redact``
    (default: the config's ``storage.redact``, on) replaces secrets before they are stored;
    False keeps the text as is (``ctxf ingest --no-redact``).

    ``discover`` (``ctxf ingest --discover``) also ingests the logs every supported agent wrote
    in its default places (``discover``: ``agents`` limits it, ``env`` / ``cwd`` stand for
    ``os.environ`` and the current folder); the result's ``discovered`` says what was found.
    An unknown agent name raises ``UsageError`` before the store is opened.

    ``executor`` (``serial``, ``process``, ``ray``; ``process`` when ``workers`` > 1 alone)
    reads the files on workers and writes them here, in order (``store/parallel.py``): the same
    report, plus ``executor`` (name, workers, retries). ``ray_address`` as for ``audit``.
    """
    from contextlib import nullcontext

    from ..errors import UsageError
    from ..executors import make_executor
    from ..store import discover as disc
    from ..store.ingest import expand, ingest_units
    from ..store.inputs import Walk
    from ..store.parallel import ingest_parallel
    from .redaction import redactor

    items = [paths] if isinstance(paths, (str, Path)) else list(paths)
    names = [agents] if isinstance(agents, str) else list(agents or [])
    if names and not discover:
        raise UsageError("--agent limits --discover", hint="add --discover, or give the log paths")
    if workers is not None and workers < 1:
        raise UsageError("workers must be at least 1", hint="give --workers N with N >= 1")
    name = executor or ("process" if (workers or 1) > 1 else None)
    if ray_address is not None and name is None:
        raise UsageError("--ray-address is for --executor ray", hint="add --executor ray, or drop --ray-address")
    found = disc.discover(names, env=env, cwd=cwd) if discover else None
    ex = make_executor(name, workers=workers, ray_address=ray_address) if name else None
    with ex or nullcontext(), using(store, db, config) as ws:
        walk = Walk()
        units, ignored = expand(items, fmt=fmt, recursive=recursive, walk=walk) if items else ([], [])
        if found is not None:
            planned = disc.plan(found)
            units += planned.units
            ignored += planned.ignored
        kwargs: dict[str, Any] = dict(ignored=ignored, links_skipped=walk.links_skipped, task=task, outcome=outcome,
                                      force=force, options={"table": table} if table else None, progress=progress,
                                      redact=redactor(ws.cfg, redact))
        if ex is not None and ex.name != "serial":
            report = ingest_parallel(ws.store, units, executor=ex, **kwargs)
        else:  # today's ingest, in this process
            report = ingest_units(ws.store, units, **kwargs)
            if ex is not None:
                report.executor = {"name": ex.name, "workers": ex.workers, "retries": ex.retries}
    return IngestResult(report, found)


def discover(agents: str | Iterable[str] | None = None, *, env: Mapping[str, str] | None = None,
             cwd: str | Path | None = None) -> DiscoverResult:
    """Find the logs of every supported agent (or of ``agents``) in its default places, without
    reading or storing anything (``ctxf ingest --discover --dry-run``): per agent, the places
    searched, the logs there, their bytes and newest modification. ``env`` / ``cwd`` stand for
    ``os.environ`` (``HOME``, ``APPDATA``, each tool's override) and the current folder (Aider's
    files are looked for there and in its git root). An unknown agent raises ``UsageError``."""
    from ..store import discover as disc

    names = [agents] if isinstance(agents, str) else list(agents or [])
    return DiscoverResult(disc.discover(names, env=env, cwd=cwd))


def replay(session: str | Path, *, model: Models = None, policy: str | None = None,
           params: Mapping[str, Any] | None = None, use_cache: bool = True, fmt: str | None = None,
           store: Workspace | None = None, db: str | Path | None = None,
           config: ConfigLike = None, overhead_from: str | None = None) -> ReplayResult:
    """Replay every model call of a session: what was in the window, what had been lost
    (``ctxf replay``).

    ``model`` (a name or several, for a side-by-side what-if) replays under that model and its
    overflow policy; without it, the recorded model under the ``recorded`` policy (the log's
    own compactions and clearings as ground truth). ``policy`` / ``params`` override the
    policy. A model the table cannot place raises ``UsageError`` with the closest names.
    ``overhead_from``: a stored request capture (a HAR file's session) whose system prompt and
    tool definitions every call adds where the log lacks them; by default a capture of the
    same agent version is taken if the store holds one, ``"none"`` takes none.
    """
    from ..analysis.check import quick_checks
    from ..analysis.replay import REPLAY_VERSION, replay_session

    names = model_list(model)
    with using(store, db, config, names, create=on_disk(session)) as ws:
        sid, row = ws.session(str(session), fmt)
        alert = ws.cfg.analysis_thresholds.min_context_utilization_alert
        pol = recorded_unless(names, policy)
        each: list[str | None] = list(names) or [None]  # None: the recorded model (or assumed limits)
        cap = _capture_id(ws, overhead_from)
        reps = [replay_session(ws.store, sid, m, config=ws.cfg, policy=pol, params=dict(params or {}),
                               alert=alert, use_cache=use_cache, overhead_from=cap) for m in each]
        own = reps[0] if each == [None] and pol in (None, "recorded") and not params else None
        checked = quick_checks(ws.store, sid, config=ws.cfg, replay=own).to_dict()
        checked.pop("session", None)
    return ReplayResult(REPLAY_VERSION, session_json(row), reps, checked)


def _capture_id(ws: Workspace, ref: str | None) -> str | None:
    """``overhead_from`` as a full session id (a prefix resolved), or None / ``none`` as given."""
    from ..analysis.replay.captures import NONE

    if ref is None or ref.strip().lower() == NONE:
        return ref
    return ws.resolve(ref)


def window(session: str | Path, step: int, *, model: Models = None, policy: str | None = None,
           params: Mapping[str, Any] | None = None, fmt: str | None = None, store: Workspace | None = None,
           db: str | Path | None = None, config: ConfigLike = None,
           overhead_from: str | None = None) -> WindowResult:
    """The exact window of one step (``ctxf replay --at STEP``): every message with its state and
    tokens, and the parts the window's token figure adds up from; one window per ``model``."""
    from ..analysis.replay import window_at

    names = model_list(model)
    with using(store, db, config, names, create=on_disk(session)) as ws:
        sid = ws.resolve(str(session), fmt)
        pol = recorded_unless(names, policy)
        each: list[str | None] = list(names) or [None]
        cap = _capture_id(ws, overhead_from)
        wins = [window_at(ws.store, sid, step, m, config=ws.cfg, policy=pol, params=dict(params or {}),
                          overhead_from=cap) for m in each]
    return WindowResult(wins)


def facts(session: str | Path, facts: str | Iterable[str] | None = None, *,
          facts_file: str | Path | Iterable[str | Path] | None = None, model: str | None = None,
          policy: str | None = None, params: Mapping[str, Any] | None = None, threshold: float | None = None,
          long_window: int = 32_000, at: int | None = None, fmt: str | None = None,
          store: Workspace | None = None, db: str | Path | None = None, config: ConfigLike = None,
          progress: Progress | None = None, exhaustive: bool = False) -> FactsResult:
    """Track facts (constraints, numbers, names) through every step's window (``ctxf facts``).

    The facts are ``facts`` (one text or several), those of ``facts_file`` (a YAML list, ``facts: [...]``, or one per
    line) and, when neither is given, the config's ``facts:`` list. ``threshold`` is the presence
    cosine (default ``analysis_thresholds.fact_presence_cosine``); windows of at least
    ``long_window`` tokens count as long (a fact deep in their middle is ``at_risk``). Uses the
    embedding model of the config (offline). ``at``, a step you will ask about
    (``state_at``, ``gone_at``), is checked before the embedding work starts. Only the chunks that
    could hold a fact are embedded; ``exhaustive=True`` embeds every chunk (the full method; near
    misses then come from every chunk).
    """
    from ..analysis.facts import FACTS_VERSION, gather_facts, track_facts
    from ..analysis.replay import get_policy, prepare
    from ..config.models import spec_notes
    from ..embed.embedders import embedder_for
    from ..errors import UsageError

    files = None if facts_file is None else (
        [Path(facts_file)] if isinstance(facts_file, (str, Path)) else [Path(p) for p in facts_file])
    with using(store, db, config, model, create=on_disk(session)) as ws:
        cfg = ws.cfg
        given = None if facts is None else [facts] if isinstance(facts, str) else list(facts)
        wanted = gather_facts(given, files, cfg.facts)
        th = cfg.analysis_thresholds.fact_presence_cosine if threshold is None else threshold
        sid, row = ws.session(str(session), fmt)
        if not wanted:
            raise UsageError("no facts to track",
                             hint="give --fact TEXT, --facts-file FILE or a `facts:` list in the config; "
                                  f"`ctxf facts suggest {session}` proposes some")
        pol = recorded_unless(model, policy)
        params = dict(params or {})
        if pol is not None and getattr(get_policy(pol), "uses_facts", False):
            params.setdefault("facts", wanted)  # a policy that pins or restates facts: the ones tracked
        prep = prepare(ws.store, sid, model, config=cfg, policy=pol, params=params)
        if at is not None and not 1 <= at <= len(prep.inp.steps):
            raise UsageError(f"step {at} is out of range: this session has {len(prep.inp.steps)} step(s)",
                             hint="steps are model calls, numbered from 1")
        report = track_facts(prep, wanted, embedder_for(cfg), ws.store, threshold=th,
                             middle_min_tokens=long_window, cache_enabled=cfg.embedding.cache_enabled,
                             ttl_hours=cfg.embedding.cache_ttl_hours, progress=progress, exhaustive=exhaustive)
    return FactsResult(FACTS_VERSION, session_json(row), report, prep.spec.assumed_dict(), spec_notes(prep.spec))


def drift(session: str | Path, *, goal: str | None = None, model: str | None = None, policy: str | None = None,
          params: Mapping[str, Any] | None = None, window_size: int | None = None, fmt: str | None = None,
          store: Workspace | None = None, db: str | Path | None = None, config: ConfigLike = None,
          progress: Progress | None = None) -> DriftResult:
    """Score each step's recent output against the session's goal: a drift curve with verdicts
    and reasons (``ctxf drift``).

    ``goal`` defaults to the config's ``drift.goal``, else the system prompt and the first user
    message; ``model`` replays under that model for the goal-left-window event (a what-if).
    """
    from ..analysis.drift import drift_session
    from ..analysis.replay import model_notes_for

    with using(store, db, config, model, create=on_disk(session)) as ws:
        sid, row = ws.session(str(session), fmt)
        report = drift_session(ws.store, sid, model, config=ws.cfg, policy=recorded_unless(model, policy),
                               params=dict(params or {}), goal=goal, window_size=window_size, progress=progress)
        # the limits the goal-window events rest on (assumed when the table cannot place the model)
        notes = model_notes_for(ws.store, sid, model, ws.cfg) if report.model else []
    return DriftResult(session_json(row), report, notes)


def diverge(a: str | Path | None = None, b: str | Path | None = None, *, task: str | None = None,
            model: str | None = None, strict: bool = False, full: bool = False, fmt: str | None = None,
            store: Workspace | None = None, db: str | Path | None = None, config: ConfigLike = None,
            progress: Progress | None = None) -> DivergeResult:
    """Find where run ``b`` (the failed one) first parted from run ``a`` (the good one), and why
    (``ctxf diverge A B``); or, with ``task``, compare a success and a failure of that task
    from the store (the first pair; ``notes`` says when there are more).

    ``strict`` counts read-only detours that rejoin as divergences; ``full`` compares every
    aligned pair with the embedding model, also after the divergence.
    """
    from ..analysis.diverge import diverge as run_diverge, task_pairs
    from ..analysis.replay import model_notes_for
    from ..errors import UsageError

    if (task is None) == (a is None and b is None) or (task is None and (a is None or b is None)):
        raise UsageError("give two runs (A B), or --task KEY",
                         hint="e.g. `ctxf diverge good.traj.json bad.traj.json` or `ctxf diverge --task KEY`")
    notes: list[str] = []
    with using(store, db, config, model, create=on_disk(a, b)) as ws:
        if task is not None:
            pairs = task_pairs(ws.store, task)
            if not pairs:
                raise UsageError(f"task {task!r} has no pair of a success and a failure run in the store",
                                 hint="see `ctxf sessions --task KEY`; set outcomes with `ctxf ingest --outcome`")
            _, sa, sb = pairs[0]
            if len(pairs) > 1:
                notes.append(f"task {task}: {len(pairs)} success/failure pairs; comparing the first "
                             f"({sa} vs {sb}); --all-tasks lists them all")
        else:
            sa, sb = ws.resolve(str(a), fmt), ws.resolve(str(b), fmt)
        rep = run_diverge(ws.store, sa, sb, model=model, config=ws.cfg, progress=progress,
                          tolerate_detours=not strict, full=full)
        sides = {"a": (rep.a, sa), "b": (rep.b, sb)}
        model_notes = {side: model_notes_for(ws.store, sid, model, ws.cfg)
                       for side, (run, sid) in sides.items() if run.get("replay") is not None}
    return DivergeResult(rep, model_notes, notes)


def divergences(*, model: str | None = None, strict: bool = False, full: bool = False,
                store: Workspace | None = None, db: str | Path | None = None, config: ConfigLike = None,
                progress: Progress | None = None) -> DivergencesResult:
    """Every task of the store with both outcomes: each failure against the task's first success,
    one line per pair (``ctxf diverge --all-tasks``)."""
    from ..analysis.diverge import DIVERGE_VERSION, diverge as run_diverge, task_pairs

    out = []
    with using(store, db, config, model, create=False) as ws:
        for t, sa, sb in task_pairs(ws.store):
            rep = run_diverge(ws.store, sa, sb, model=model, config=ws.cfg, progress=progress,
                              tolerate_detours=not strict, full=full)
            out.append({"task": t, **rep.summary(t), "divergence": rep.divergence})
    return DivergencesResult(DIVERGE_VERSION, out)


def audit(paths: str | Path | Iterable[str | Path] | None = None, *, fail_on: str | Iterable[str] | None = None,
          task: str | None = None, workers: int | None = None, recursive: bool = True, store: Workspace | None = None,
          db: str | Path | None = None, config: ConfigLike = None, progress: Progress | RunUpdates | None = None,
          ingested: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None = None,
          redact: bool | None = None, executor: str | None = None, ray_address: str | None = None,
          jsonl: Any = None, keep: bool | None = None) -> AuditResult:
    """Run the config's audit rules over sessions (``ctxf audit``): the ``paths`` given (files,
    folders, globs, fsspec URLs), else every session in the store (of ``task``).

    ``fail_on`` names rules whose failures make ``exit_code`` 3, besides those marked
    ``fail: true``. An input that cannot be read is a row of ``errors`` and makes it 1.
    ``executor`` (``serial``, ``process``, ``ray``; default ``process`` when ``workers`` > 1,
    else ``serial``) runs the tasks: with paths, each task ingests its files into a private
    store and audits them there; the results stream back here, into ``jsonl`` (a path or an open
    text file: one line per session) and the report. ``workers``: processes, or a local Ray's
    CPUs. ``ray_address`` joins a Ray cluster (``auto``: the one this job runs in). ``keep``:
    store the sessions of the paths (default: yes, except on Ray without ``db``). ``ingested``,
    when given, is called with the ingest report and the unreadable inputs once the files are
    read (the CLI prints their problems there). ``redact`` as for ``ingest``. A Ctrl-C stops the
    run: the result says ``interrupted`` and its ``exit_code`` is 130.
    """
    from ..analysis.audit import audit_many
    from ..config.audit_rules import RULE_PARAMS, parse_audit
    from ..errors import UsageError
    from ..executors import make_executor
    from .redaction import redactor

    names = fail_on.split(",") if isinstance(fail_on, str) else list(fail_on or ())
    fail_set = {r.strip() for r in names if r.strip()}
    items = None if paths is None else [paths] if isinstance(paths, (str, Path)) else list(paths)
    if workers is not None and workers < 1:
        raise UsageError("workers must be at least 1", hint="give --workers N with N >= 1")
    name = executor or ("process" if (workers or 1) > 1 else "serial")
    if ray_address is not None and name != "ray":
        raise UsageError("--ray-address is for --executor ray", hint="add --executor ray, or drop --ray-address")
    if not items and name == "ray" and ray_address is not None:
        raise UsageError("a Ray cluster audits files, not this machine's store",
                         hint="give the logs' paths or URLs (the workers read them); a store file is not "
                              "shipped to a cluster")
    with using(store, db, config, create=bool(items)) as ws:  # paths are ingested: that creates it
        cfg = ws.cfg
        rules = parse_audit(cfg.audit, cfg.source, cfg)
        unknown = fail_set - set(RULE_PARAMS)
        if unknown:
            raise UsageError(f"--fail-on names unknown rule(s): {', '.join(sorted(unknown))}",
                             hint="known rules: " + ", ".join(RULE_PARAMS))
        missing = fail_set - {r.name for r in rules}
        if missing:
            raise UsageError(f"--fail-on names rule(s) not enabled in the config: {', '.join(sorted(missing))}",
                             hint="add them under audit.rules in the config")
        if not items:
            if jsonl is not None:
                raise UsageError("--jsonl streams an audit of files", hint="give the logs' paths, or use --json")
            # Store order (``Store.sessions``) whatever the worker count.
            ids = [s["id"] for s in ws.store.sessions(task=task)]
            # A store with no file (":memory:") is audited on this connection: nothing else can open it.
            memory = ws.store if ws.store.path is None else None
            if memory is not None and name != "serial":
                raise UsageError("an in-memory store cannot be shared with worker processes",
                                 hint="use workers=1, or a store file (open_store('audit.db'))")
            with make_executor(name, workers=workers, ray_address=ray_address) as ex:
                # an audit of stored sessions counts them, (done, total): a RunUpdates takes a run of paths
                result = audit_many(str(ws.store.path or ":memory:"), ids, cfg, rules, fail_on=fail_set,
                                    progress=progress if callable(progress) else None, store=memory, executor=ex)
                result["executor"] = {**ex.describe(), "retries": ex.retries}
            return AuditResult(**result, ingest=None)
        keep_sessions = keep if keep is not None else (name != "ray" or db is not None or store is not None)
        return _audit_files(ws, items, rules, cfg, fail_set, name=name, workers=workers, ray_address=ray_address,
                            recursive=recursive, task=task, redact=redactor(cfg, redact), keep=keep_sessions,
                            jsonl=jsonl, progress=progress, ingested=ingested)


def _audit_files(ws: Workspace, items: list, rules: list, cfg: Any, fail_set: set[str], *, name: str,
                 workers: int | None, ray_address: str | None, recursive: bool, task: str | None, redact: Any,
                 keep: bool, jsonl: Any, progress: Progress | RunUpdates | None,
                 ingested: Callable[[dict[str, Any], list[dict[str, Any]]], None] | None) -> AuditResult:
    """``audit`` of paths: list them here, audit them in tasks on the executor (``distributed``)."""
    import contextlib

    from ..analysis.audit import unreadable_inputs
    from ..analysis.audit.distributed import audit_units, classifier
    from ..analysis.audit.inputs import UNKNOWN_LAYOUT, UNKNOWN_LAYOUT_HINT
    from ..analysis.audit.runner import _divergences, build_report
    from ..errors import UsageError
    from ..executors import make_executor
    from ..store.sources import list_sources

    with contextlib.ExitStack() as stack:
        ex = stack.enter_context(make_executor(name, workers=workers, ray_address=ray_address))
        # the walked files' formats are sniffed on the workers: the driver only walks
        listing = list_sources(items, recursive=recursive, classify_many=classifier(ex))
        streams = [src.url for src in listing.sources if src.stream]
        if streams and name != "serial":
            raise UsageError(f"a stream (a pipe) is read by this process only: {streams[0]}",
                             hint="audit it with --executor serial, or save it to a file first")
        out = jsonl
        if jsonl is not None and not hasattr(jsonl, "write"):
            from ..store.files import open_private_text

            out = stack.enter_context(open_private_text(Path(jsonl)))
        sessions, report, figures, paired, interrupted = audit_units(
            listing.sources, ws.store, cfg, rules, executor=ex, task=task, redact=redact, keep=keep, jsonl=out,
            # distributed._report takes a RunUpdates too (its update); audit_units' hint names only the callback
            progress=progress)  # type: ignore[arg-type]
    report["ignored"] = list(listing.ignored)
    # A remote file of a layout no importer reads was walked over (``skipped``): listed, as a local one
    skipped = [f for f in report["files"] if f.get("status") == "skipped"]
    report["files"] = [f for f in report["files"] if f.get("status") != "skipped"]
    # Every input it could not read is a row of the audit's reports (and exit 1): a CI summary
    # must not look green over logs nobody checked.
    unreadable, ignored, not_read = unreadable_inputs(report, exclude=(cfg.source,) if cfg.source else (),
                                                  redact=redact)
    not_read += [{"path": f["path"], "reason": UNKNOWN_LAYOUT, "hint": UNKNOWN_LAYOUT_HINT} for f in skipped]
    if ingested is not None:
        ingested({**report, "ignored": ignored}, unreadable)
    divergences = []
    if paired is not None and any(r.name == "divergence" for r in rules):
        divergences = _divergences("", sessions, cfg, paired)
        if paired is not ws.store:
            paired.close()
    result = build_report(sessions, rules, fail_on=fail_set, unreadable=unreadable, ignored=ignored,
                          not_read=not_read, divergences=divergences)
    if interrupted:
        result["exit_code"] = 130
    return AuditResult(**result, ingest=report, executor=figures["executor"],
                       run={k: v for k, v in figures.items() if k != "executor"}, interrupted=interrupted,
                       stored=keep)
