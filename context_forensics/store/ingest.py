"""Ingest: expand paths into import units, detect formats, write each unit in one transaction.

A unit is a file, or a directory an importer reads whole (an OpenHands ``llm_completions/``
folder). Re-ingesting an unchanged unit is a no-op (content hash); a changed unit replaces
the sessions it produced before. One failing unit never loses the others.

A session is identified by its content, not by the path it was reached through: a session
whose format, external id and messages equal a stored one from another path (the same
OpenHands run through its ``llm_completions/`` folder and through the run folder, a copy of a
trajectory elsewhere) is that session. The store keeps the first path as its ``source``, the
new path's file record points at it (so ``ctxf show OTHER_PATH`` finds it) and the unit is
reported ``unchanged`` with ``same_as`` naming the stored session. Byte-identical copies never
get that far: their file hash is already known. Sessions with a global id (a Claude Code
``sessionId``) are one session by that id whatever the path.

One bad input fails alone (``inputs``: streams read once and bounded, FIFOs and devices
refused, symlink loops skipped, unreadable files failed by name; ``gate``: what the store
would refuse); inside a file, a record of unexpected shape is skipped and counted by its
importer, and the file fails only when nothing in it could be read (``ImportContext.bad``).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .. import importers
from ..errors import CtxfError, ExitCode, InputError, NotFoundError, UnknownFormatError, UsageError
from ..hashing import file_hash, short_id
from ..importers.base import NESTING_HINT, ImportContext, Importer, read_head
from ..records import OUTCOMES, Session
from . import inputs
from .db import Store, session_id
from .gate import careful_session, careful_source, check_session, repair_warnings
from .redact import Redactor


@dataclass
class FileResult:
    path: str
    format: str | None = None
    status: str = "ingested"  # ingested | unchanged | failed | skipped
    sessions: list[str] = field(default_factory=list)
    messages: int = 0
    replaced: int = 0
    warnings: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    # Sessions of this unit already stored from another path: [{"session", "source"}]
    same_as: list[dict[str, str]] = field(default_factory=list)
    # Secrets replaced before storing, by type ({"openai-key": 2}); None: redaction was off.
    redacted: dict[str, int] | None = None
    exit_code: int = 0

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "exit_code"}


@dataclass
class IngestReport:
    files: list[FileResult] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # walked files no importer recognised
    links_skipped: int = 0  # links to a folder or file a walk had already met (``inputs.walk``)

    @property
    def exit_code(self) -> ExitCode:
        codes = {f.exit_code for f in self.files if f.status == "failed"}
        if not codes:
            return ExitCode.OK
        # Any unreadable file makes it an error (1); only unknown formats make it usage (2).
        return ExitCode.ERROR if ExitCode.ERROR in codes else ExitCode.USAGE

    def totals(self) -> dict[str, int]:
        skipped = sum(sum(f.skipped.values()) for f in self.files)
        return {
            "files": len(self.files),
            "ingested": sum(f.status == "ingested" for f in self.files),
            "unchanged": sum(f.status == "unchanged" for f in self.files),
            "failed": sum(f.status == "failed" for f in self.files),
            "sessions": sum(len(f.sessions) for f in self.files if f.status == "ingested"),
            "messages": sum(f.messages for f in self.files if f.status == "ingested"),
            "skipped_records": skipped,
            "warnings": sum(len(f.warnings) for f in self.files),
            "ignored_files": len(self.ignored),
            "redacted": sum(sum((f.redacted or {}).values()) for f in self.files),
            "links_skipped": self.links_skipped,
        }

    def to_dict(self) -> dict:
        return {
            "version": 1,
            "totals": self.totals(),
            "files": [f.to_dict() for f in self.files],
            "ignored": self.ignored,
        }


@dataclass(frozen=True)
class Unit:
    path: Path
    importer: Importer | None  # None: detect failed (reported as unknown format)
    explicit: bool  # named on the command line (unknown format is then an error)
    stream: bool = False  # a pipe (/dev/stdin, <(...)): read once into a bounded copy
    problem: CtxfError | None = field(default=None, compare=False)  # not read at all: this is why
    companion: bool = False  # brought along by another unit's file (``Importer.companions``)


# ---------------------------------------------------------------- expansion


def _dir_importer(path: Path) -> Importer | None:
    for imp in importers.registry().values():
        if imp.handles_directories:
            try:
                if imp.sniff(path, b""):
                    return imp
            except OSError:
                continue
    return None


def expand(paths: Iterable[str | Path], *, fmt: str | None, recursive: bool,
           walk: inputs.Walk | None = None) -> tuple[list[Unit], list[str]]:
    """Turn command-line paths into import units; return (units, ignored walked files).

    ``walk`` collects what the folder walks met besides files (links skipped)."""
    forced = importers.get(fmt) if fmt else None
    state = walk if walk is not None else inputs.Walk()
    units: list[Unit] = []
    walked: list[Path] = []

    def dir_unit(entry: Path) -> bool:  # a folder an importer reads whole is a unit of its own
        imp = _dir_importer(entry)
        if imp is not None:
            units.append(Unit(entry, imp, False))
        return imp is not None

    for raw in paths:
        p = Path(raw)
        kind = inputs.kind_of(p)
        if kind == "missing":
            units.append(Unit(p, None, True))
        elif kind == "dir":
            imp = forced if forced and forced.handles_directories else _dir_importer(p)
            if imp is not None:
                units.append(Unit(p, imp, True))
                continue
            walked.extend(inputs.walk(p, recursive, dir_unit, state))
        elif kind in ("file", "stream"):
            units.append(Unit(p, forced, True, stream=kind == "stream"))
        else:  # a named FIFO, a device, a socket: refused by name, never opened
            units.append(Unit(p, None, True, problem=inputs.refusal(kind, p)))
    for folder, e in state.unreadable:  # a folder the walk could not list fails on its own
        message, hint = inputs.os_error_message(e)
        units.append(Unit(folder, None, False, problem=InputError(f"cannot list this folder: {message}",
                                                                  where=str(folder), hint=hint)))
    state.unreadable.clear()
    ignored: list[str] = []
    sidecars: set[Path] = set()
    pending: list[Unit] = []
    for f in walked:
        try:
            head = read_head(f)
            imp = forced or importers.detect(f, head)
        except OSError:  # unreadable (no read permission): it fails on its own, by name
            pending.append(Unit(f, None, False))
            continue
        if imp is None and importers.nested_head(head) is not None:
            pending.append(Unit(f, None, False))  # JSON nested past any log's: fails, saying so
        elif imp is None:
            ignored.append(str(f))
        else:
            pending.append(Unit(f, imp, False))
            sidecars.update(_sidecars(imp, f))
    for u in units:
        if u.importer is not None:
            sidecars.update(_sidecars(u.importer, u.path))
    units.extend(pending)
    units = _with_companions(units)
    ignored = [f for f in ignored if not (set(_resolved([Path(f)])) & sidecars)]
    return units, ignored


def _with_companions(units: list[Unit]) -> list[Unit]:
    """``units`` with each file's companions (a Claude Code session's sub-agent transcripts,
    ``Importer.companions``) right after it, each path once: a companion also walked or named
    is ingested where it already was, not twice."""
    taken = set(_resolved([u.path for u in units if u.problem is None]))
    out: list[Unit] = []
    for u in units:
        out.append(u)
        if u.problem is not None or u.stream:
            continue
        imp, found = _companions_of(u)
        for c in found:
            key = next(iter(_resolved([c])), None)
            if key is None or key in taken:
                continue
            taken.add(key)
            out.append(Unit(c, imp, False, companion=True))
    return out


def _companions_of(unit: Unit) -> tuple[Importer | None, list[Path]]:
    """(the importer, the companion files) of a unit's file; (None, []) for most files."""
    for imp in [unit.importer] if unit.importer is not None else importers.registry().values():
        try:
            found = imp.companions(unit.path)
            # A file named on the command line has its format detected at ingest: check it here,
            # only for a file whose path has companions.
            if found and unit.importer is None and importers.detect(unit.path, read_head(unit.path)) is not imp:
                continue
        except OSError:  # cannot be looked at: the unit fails on its own, by name
            continue
        if found:
            return imp, found
    return None, []


def _sidecars(imp: Importer, path: Path) -> list[Path]:
    try:
        return _resolved(imp.sidecars(path))
    except OSError:  # a sidecar that cannot be looked at is no sidecar
        return []


def _resolved(paths: Iterable[Path]) -> list[Path]:
    """``paths`` resolved, leaving out those that cannot be (a symlink loop)."""
    out = []
    for p in paths:
        try:
            out.append(p.resolve())
        except (OSError, RuntimeError):
            continue
    return out


def _unit_hash(path: Path) -> tuple[str, int]:
    if path.is_file():
        return file_hash(path), path.stat().st_size
    parts, size = [], 0
    for dirpath, _, names in sorted(os.walk(path)):
        for n in sorted(names):
            f = Path(dirpath) / n
            st = f.stat()
            if not stat.S_ISREG(st.st_mode):  # a FIFO or a device in the folder: never opened
                continue
            parts.append(f"{f.relative_to(path)}={file_hash(f)}")
            size += st.st_size
    return short_id(*parts, length=32), size


# ---------------------------------------------------------------- ingest


ProgressFn = Callable[[str, int, int], None]  # (path, done units, total units)


def ingest_paths(
    store: Store,
    paths: Iterable[str | Path],
    *,
    fmt: str | None = None,
    recursive: bool = False,
    task: str | None = None,
    outcome: str | None = None,
    force: bool = False,
    options: dict | None = None,
    progress: ProgressFn | None = None,
    redact: bool | Redactor = True,
) -> IngestReport:
    """Ingest every path; never raises for a bad file (it is reported as failed).

    ``redact``: replace secrets before storing (store/redact.py): True with the built-in rules,
    a ``Redactor`` for the config's rules and original token counts, False to store text as is."""
    if outcome is not None and outcome not in OUTCOMES:
        raise UsageError(f"unknown outcome {outcome!r}", hint="use one of: " + ", ".join(OUTCOMES))
    walk = inputs.Walk()
    units, ignored = expand(paths, fmt=fmt, recursive=recursive, walk=walk)
    return ingest_units(store, units, ignored=ignored, links_skipped=walk.links_skipped, task=task,
                        outcome=outcome, force=force, options=options, progress=progress, redact=redact)


def ingest_units(store: Store, units: list[Unit], *, ignored: list[str] | None = None, links_skipped: int = 0,
                 task: str | None = None, outcome: str | None = None, force: bool = False,
                 options: dict | None = None, progress: ProgressFn | None = None,
                 redact: bool | Redactor = True) -> IngestReport:
    """Ingest units already expanded (``expand``, or ``discover.plan``), each in its own
    transaction, into one report; never raises for a bad unit."""
    if outcome is not None and outcome not in OUTCOMES:
        raise UsageError(f"unknown outcome {outcome!r}", hint="use one of: " + ", ".join(OUTCOMES))
    report = IngestReport(ignored=list(ignored or []), links_skipped=links_skipped)
    for i, unit in enumerate(units):
        if progress:
            progress(str(unit.path), i, len(units))
        report.files.append(
            ingest_unit(store, unit, task=task, outcome=outcome, force=force, options=options or {}, redact=redact)
        )
    if progress:
        progress("", len(units), len(units))
    return report


def ingest_unit(store: Store, unit: Unit, *, task: str | None = None, outcome: str | None = None,
                force: bool = False, options: dict | None = None, redact: bool | Redactor = True) -> FileResult:
    """Ingest one unit in one transaction; never raises for bad input (the result says it failed).

    A refused path (``unit.problem``) fails without being opened; a stream is read once into a
    bounded temporary copy, which is ingested under the stream's name; a file the store refuses
    a value of is rolled back and read again in careful mode (``gate``).
    """
    if unit.problem is not None:
        res = FileResult(path=str(unit.path))
        _fail(res, unit.problem, ExitCode.ERROR)
        return res
    kwargs = dict(task=task, outcome=outcome, force=force, options=options, redact=redact)
    if unit.stream:
        return _ingest_stream(store, unit, **kwargs)  # type: ignore[arg-type]
    try:
        return _ingest_once(store, unit, **kwargs)  # type: ignore[arg-type]
    except _Careful:
        return _ingest_once(store, unit, careful=True, **kwargs)  # type: ignore[arg-type]


class _Careful(Exception):
    """The store refused a value of this unit: roll it back, read it again in careful mode."""


def _ingest_stream(store: Store, unit: Unit, **kwargs: object) -> FileResult:
    """A stream, read once into a bounded copy that is ingested under the stream's name."""
    try:
        copy = inputs.spool(unit.path)
    except CtxfError as e:
        res = FileResult(path=str(unit.path))
        _fail(res, e, ExitCode.ERROR)
        return res
    try:
        one = Unit(copy, unit.importer, unit.explicit)
        try:
            res = _ingest_once(store, one, source=str(unit.path), **kwargs)  # type: ignore[arg-type]
        except _Careful:
            res = _ingest_once(store, one, source=str(unit.path), careful=True, **kwargs)  # type: ignore[arg-type]
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    res.path = str(unit.path)
    res.warnings = [w.replace(str(copy), str(unit.path)) for w in res.warnings]
    if res.error:
        res.error = res.error.replace(str(copy), str(unit.path))
    res.warnings.insert(0, f"{unit.path}: a stream (a pipe): read once, into a temporary copy of at most "
                           f"{inputs.STREAM_LIMIT // (1024 * 1024)} MiB")
    return res


def _ingest_once(store: Store, unit: Unit, *, task: str | None = None, outcome: str | None = None,
                 force: bool = False, options: dict | None = None, redact: bool | Redactor = True,
                 careful: bool = False, source: str | None = None) -> FileResult:
    res = FileResult(path=str(unit.path))
    red = redact if isinstance(redact, Redactor) else Redactor() if redact else None
    if red is not None:
        red.reset()
    repairs: Counter = Counter()  # careful mode's repairs, by kind
    try:
        if not unit.path.exists():
            raise InputError("no such file or directory", where=str(unit.path))
        imp = unit.importer
        if imp is None:
            head = read_head(unit.path)
            imp = importers.detect(unit.path, head)
            if imp is None:
                raise importers.unknown_format(unit.path, head)
        res.format = imp.name
        fhash, size = _unit_hash(unit.path)
        if options:  # the same file read with other options (e.g. --table) is another unit
            fhash = short_id(fhash, json.dumps(options, sort_keys=True), length=32)
        if red is not None:  # read with other redaction rules, a file is read again (never stored twice)
            fhash = short_id(fhash, red.fingerprint, length=32)
        source = source or str(unit.path.resolve())
        if careful:
            source = careful_source(source, repairs)
        known = store.file_record(fhash)
        # A record listing a session no longer stored (left by `ctxf rm` before it forgot file
        # records) answers nothing: the file is read again.
        if known is not None and store.missing_sessions(_json_list(known["sessions"])):
            known = None
        if known is not None and not force and task is None and outcome is None:
            res.status = "unchanged"
            res.sessions = _json_list(known["sessions"])
            res.messages = known["message_count"] or 0
            # A copy, or the same run through another path: say where the stored sessions are from.
            res.same_as = store.sources_other_than(res.sessions, source)
            return res
        ctx = ImportContext(path=unit.path, options=options or {})
        with store.transaction():
            produced: dict[str, str] = {}  # external id -> session id
            changed: list[str] = []  # stored sessions whose content this unit rewrote
            for session in imp.parse(unit.path, ctx):
                if careful:  # the store refused a value of this file: repair as they stream
                    careful_session(session, ctx, repairs)
                else:
                    check_session(session, ctx)
                if red is not None:  # before anything of it is stored (messages as they stream)
                    red.session(session)
                if task is not None:
                    session.task = task
                if outcome is not None:
                    session.outcome = outcome
                sid = _session_id(session, source)
                if sid in produced.values():
                    ctx.warn(f"session {session.external_id!r} appears twice; kept the last one")
                parent = None
                if session.parent_external_id:
                    parent = produced.get(session.parent_external_id) or session_id(
                        session.format, session.parent_external_id
                    )
                w = store.write_session(session, sid=sid, source=source, source_hash=fhash, parent_id=parent)
                kept = sid
                if not session.global_id and w.messages:
                    same = store.same_run(sid, session.format, session.external_id, w.content_hash)
                    if same is not None and same["id"] not in produced.values():
                        # The same run, stored from another path: keep that one, drop this copy
                        # (and any older version of it this path produced).
                        store.delete_sessions([sid])
                        store.relabel(same["id"], task=task, outcome=outcome)
                        kept = same["id"]
                        res.same_as.append({"session": kept, "source": same["source"]})
                if kept == sid and w.replaced and not w.unchanged:
                    changed.append(sid)
                produced[session.external_id] = kept
                res.messages += w.messages
                res.replaced += int(w.replaced and not w.unchanged)
            ctx.finish()
            repair_warnings(repairs, ctx)
            if ctx.bad and not res.messages:  # every record it holds was of unexpected shape
                raise InputError(
                    f"nothing in this file could be read: {ctx.bad} record(s) of unexpected shape, all "
                    f"skipped; the first: {ctx.first_bad}",
                    where=str(unit.path),
                    hint="if the format was guessed wrong, force one with --format",
                )
            res.sessions = list(dict.fromkeys(produced.values()))
            res.replaced += store.remove_stale(source, res.sessions)
            # Records of other versions of this file list sessions it has just rewritten.
            store.forget_files(changed, keep_hash=fhash)
            if res.sessions and len(res.same_as) == len(res.sessions):
                res.status = "unchanged"  # every session was already stored: nothing new
            if red is not None:
                ctx.warnings[:] = [red.text(w) for w in ctx.warnings]
            if careful:  # the warnings name the file, whose name may not be UTF-8
                ctx.warnings[:] = [careful_source(w, repairs) for w in ctx.warnings]
            store.record_file(
                file_hash=fhash, path=source, fmt=imp.name, size=size, sessions=res.sessions,
                messages=res.messages, warnings=ctx.warnings, skipped=dict(ctx.skipped),
            )
        res.warnings = ctx.warnings
        if red is not None:
            res.redacted = dict(sorted(red.reset().items()))
        res.skipped = dict(ctx.skipped)
        if not res.sessions:
            res.warnings.append(f"{unit.path}: no sessions found in this file")
    except UnknownFormatError as e:
        _fail(res, e, ExitCode.USAGE if unit.explicit else ExitCode.ERROR)
    except CtxfError as e:
        _fail(res, e, ExitCode.ERROR)
    except (sqlite3.InterfaceError, sqlite3.ProgrammingError, UnicodeEncodeError, OverflowError) as e:
        # A value the store cannot hold (a lone surrogate, an integer beyond 64 bits, a type it
        # does not bind): rolled back; read again in careful mode, which repairs such values.
        if not careful:
            raise _Careful from e
        _fail(res, InputError(f"a value in this file cannot be stored ({type(e).__name__}: {e})",
                              where=str(unit.path), hint="please report this file"), ExitCode.ERROR)
    except sqlite3.Error as e:
        _fail(res, CtxfError(f"store write failed: {e}", where=str(unit.path)), ExitCode.ERROR)
    except OSError as e:
        message, hint = inputs.os_error_message(e)
        _fail(res, InputError(message, where=str(unit.path), hint=hint), ExitCode.ERROR)
    except UnicodeError as e:
        _fail(res, InputError(f"cannot read: {e}", where=str(unit.path)), ExitCode.ERROR)
    except MemoryError:  # rolled back; what the file's parse held is freed as this unwinds
        _fail(res, InputError("ran out of memory reading this file; nothing of it was stored", where=str(unit.path),
                              hint="ingest it alone, or on a machine with more memory; a small archive that "
                              "inflates to gigabytes is a decompression bomb"), ExitCode.ERROR)
    except RecursionError:  # the readers bound nesting (importers/_json.py): the last line of defence
        _fail(res, InputError("cannot read: a value in this file is nested too deeply", where=str(unit.path),
                              hint=NESTING_HINT), ExitCode.ERROR)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:
        # The importer met a shape it did not expect outside any one record (its records are
        # skipped one by one): this file's failure, with Python's words for what it met.
        _fail(
            res,
            InputError(
                f"cannot read this file as {res.format}: its layout has an unexpected type or shape "
                f"({type(e).__name__}: {e})",
                where=str(unit.path),
                hint="if the format was guessed wrong, force one with --format; otherwise please "
                "report this file",
            ),
            ExitCode.ERROR,
        )
    return res


def _session_id(session: Session, source: str) -> str:
    if session.global_id:
        return session_id(session.format, session.external_id)
    return session_id(session.format, session.external_id, source)


def _fail(res: FileResult, e: CtxfError, code: ExitCode) -> None:
    res.status = "failed"
    res.error = str(e)
    res.exit_code = int(code)
    res.sessions = []
    res.messages = 0


def _json_list(text: str | None) -> list[str]:
    return json.loads(text) if text else []


def resolve_session(store: Store, ref: str, *, fmt: str | None = None, redact: bool | Redactor = True) -> str:
    """A session id from an id, a unique id prefix, or a log file path (ingested on the fly;
    ``redact`` as for ``ingest_paths``)."""
    p = Path(ref)
    if p.exists():
        units, _ = expand([p], fmt=fmt, recursive=False)
        ids: list[str] = []
        for unit in units:
            res = ingest_unit(store, unit, redact=redact)
            if res.status == "failed" and not unit.companion:  # a broken sub-agent file fails alone
                err = UnknownFormatError if res.exit_code == ExitCode.USAGE else InputError
                raise err(res.error or "cannot ingest")
            ids.extend(res.sessions)
        if len(ids) == 1:
            return ids[0]
        if not ids:
            raise InputError("the file holds no sessions", where=ref)
        # Several sessions: a parent with its sub-agents resolves to the parent.
        roots = [i for i in ids if not store.session(i)["parent_id"] in ids]
        if len(roots) == 1:
            return roots[0]
        raise UsageError(
            f"{ref} holds {len(ids)} sessions",
            hint="pick one by id: " + ", ".join(ids[:10]) + (" …" if len(ids) > 10 else ""),
        )
    matches = store.find_sessions(ref)
    if ref in matches:
        return ref
    if len(matches) == 1:
        return matches[0]
    if not matches:
        raise NotFoundError(
            f"no session matches {ref!r} (not an id, an id prefix or an existing file)",
            hint="list sessions with `ctxf sessions`, or pass a log file path",
        )
    raise NotFoundError(
        f"{ref!r} is ambiguous: {len(matches)} sessions start with it",
        hint="use a longer prefix: " + ", ".join(matches[:8]),
    )
