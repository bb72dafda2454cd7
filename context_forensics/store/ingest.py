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

import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .. import importers
from ..errors import CtxfError, ExitCode, InputError, NotFoundError, UnknownFormatError, UsageError
from ..importers.base import RECORD_ERRORS, Importer, read_head
from ..records import OUTCOMES
from . import inputs
from .db import Store
from .redact import Redactor
from .units import (  # noqa: F401 - re-exported: the ingest's records and its two halves
    FileResult,
    ParsedUnit,
    Unit,
    _Careful,
    _fail,
    _redactor,
    known_result,
    parse_unit,
    shown,
    shown_path,
    unit_hash_key,
    write_parsed,
)

STORED = ("ingested", "partial")  # the statuses of a unit read and stored now


@dataclass
class IngestReport:
    files: list[FileResult] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)  # walked files no importer recognised
    links_skipped: int = 0  # links to a folder or file a walk had already met (``inputs.walk``)
    executor: dict | None = None  # which executor read the units ({name, workers, retries}; parallel.py)

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
            "ingested": sum(f.status == "ingested" for f in self.files),  # whole: no record unread
            "partial": sum(f.status == "partial" for f in self.files),  # stored in part (``units.mark_partial``)
            "unchanged": sum(f.status == "unchanged" for f in self.files),
            "failed": sum(f.status == "failed" for f in self.files),
            "sessions": sum(len(f.sessions) for f in self.files if f.status in STORED),
            "messages": sum(f.messages for f in self.files if f.status in STORED),
            "skipped_records": skipped,
            "unread_records": sum(sum(f.unread.values()) for f in self.files),
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
        } | ({"executor": self.executor} if self.executor is not None else {})


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


def classify(paths: list[Path], fmt: str | None = None) -> list[tuple[str, str | None]]:
    """What each walked file is, by its head: ``("unit", importer name)``, ``("unit", None)``
    (it fails by name when ingested: unreadable, or JSON nested past any log's), or
    ``("ignored", None)`` (no importer recognises it). A pure function of the files, so a driver
    can have workers run it (``expand(classify_many=...)``): it reads every walked file's head."""
    forced = importers.get(fmt) if fmt else None
    out: list[tuple[str, str | None]] = []
    for f in paths:
        try:
            head = read_head(f)
            imp = forced or importers.detect(f, head)
        except Exception:  # noqa: BLE001 - unreadable (OSError), or a sniff's defect: it fails on its own, by name
            out.append(("unit", None))
            continue
        if imp is None and importers.nested_head(head) is not None:
            out.append(("unit", None))  # JSON nested past any log's: fails, saying so
        elif imp is None:
            out.append(("ignored", None))
        else:
            out.append(("unit", imp.name))
    return out


def expand(paths: Iterable[str | Path], *, fmt: str | None, recursive: bool,
           walk: inputs.Walk | None = None,
           classify_many: Callable[[list[Path]], list[tuple[str, str | None]]] | None = None
           ) -> tuple[list[Unit], list[str]]:
    """Turn command-line paths into import units; return (units, ignored walked files).

    ``walk`` collects what the folder walks met besides files (links skipped).
    ``classify_many`` replaces ``classify`` over the walked files (the same answers, computed
    elsewhere: on an executor's workers)."""
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
            try:
                imp = forced if forced and forced.handles_directories else _dir_importer(p)
            except OSError as err:  # a folder the user may not enter: one listed error, the rest read
                state.unreadable.append((p, err))
                continue
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
    kinds = (classify_many or (lambda fs: classify(fs, fmt)))(walked)
    for f, (kind, name) in zip(walked, kinds):
        if kind == "ignored":
            ignored.append(str(f))
        elif name is None:
            pending.append(Unit(f, None, False))
        else:
            imp = importers.get(name)
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
        except (OSError, CtxfError, *RECORD_ERRORS):  # cannot be looked at: the unit fails on its own, by name
            continue
        if found:
            return imp, found
    return None, []


def _sidecars(imp: Importer, path: Path) -> list[Path]:
    # Files an importer reads with ``path`` (an ATIF continuation is found by reading the file):
    # one that cannot be looked at, or a ``path`` that does not read, gives none; the unit then
    # fails on its own, by name, when it is read. Nothing raised here may stop the walk.
    try:
        return _resolved(imp.sidecars(path))
    except (OSError, CtxfError, *RECORD_ERRORS):
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
            progress(shown_path(str(unit.path), redact), i, len(units))
        try:
            res = ingest_unit(store, unit, task=task, outcome=outcome, force=force, options=options or {},
                              redact=redact)
        except Exception as e:  # noqa: BLE001 - a defect of ctxf in one unit: that unit fails, the batch goes on
            res = FileResult(path=str(unit.path), format=unit.importer.name if unit.importer else None)
            _fail(res, CtxfError(f"internal error ingesting this file ({type(e).__name__}: {e}); the other files "
                                 "are ingested", where=str(unit.path), hint="please report this file"),
                  ExitCode.ERROR)
        report.files.append(shown(res, redact))
    if progress:
        progress("", len(units), len(units))
    return report


def ingest_unit(store: Store, unit: Unit, *, task: str | None = None, outcome: str | None = None,
                force: bool = False, options: dict | None = None, redact: bool | Redactor = True,
                source: str | None = None) -> FileResult:
    """Ingest one unit in one transaction; never raises for bad input (the result says it failed).

    A refused path (``unit.problem``) fails without being opened; a stream is read once into a
    bounded temporary copy, which is ingested under the stream's name; a known unit is not read
    (``known_result``); the others are read (``parse_unit``, lazily: as they are written) and
    written (``write_parsed``), the halves a parallel ingest runs on its workers and its driver.
    ``source``: the sessions' source to record (default: the resolved path; a fetched file's URL).
    """
    if unit.problem is not None:
        res = FileResult(path=str(unit.path))
        _fail(res, unit.problem, ExitCode.ERROR)
        return res
    if unit.stream:
        return _ingest_stream(store, unit, task=task, outcome=outcome, force=force, options=options, redact=redact)
    return _read_write(store, unit, task=task, outcome=outcome, force=force, options=options, redact=redact,
                       source=source)


def _read_write(store: Store, unit: Unit, *, task: str | None = None, outcome: str | None = None,
                force: bool = False, options: dict | None = None, redact: bool | Redactor = True,
                source: str | None = None) -> FileResult:
    red = _redactor(redact)
    rd: bool | Redactor = red if red is not None else False  # one redactor for both halves
    known, key = known_result(store, unit, options=options, redact=rd, source=source, task=task,
                              outcome=outcome, force=force)
    if known is not None:
        return known
    # Lazy: read as it is written, in the unit's transaction, so a 1 GB log is never held whole.
    parsed = parse_unit(unit, options=options, redact=rd, source=source, key=key, lazy=True)
    return write_parsed(store, parsed, task=task, outcome=outcome, force=force, unit=unit, options=options,
                        redact=rd)


def _ingest_once(store: Store, unit: Unit, *, careful: bool = False, **kwargs: object) -> FileResult:
    """``ingest_unit`` of a file (its careful mode is its own now; ``careful`` is ignored): kept
    for callers written against the one-piece ingest."""
    return _read_write(store, unit, **kwargs)  # type: ignore[arg-type]


def _ingest_stream(store: Store, unit: Unit, *, task: str | None, outcome: str | None, force: bool,
                   options: dict | None, redact: bool | Redactor) -> FileResult:
    """A stream, read once into a bounded copy that is ingested under the stream's name."""
    try:
        copy = inputs.spool(unit.path)
    except CtxfError as e:
        res = FileResult(path=str(unit.path))
        _fail(res, e, ExitCode.ERROR)
        return res
    try:
        res = _read_write(store, Unit(copy, unit.importer, unit.explicit), source=str(unit.path), task=task,
                          outcome=outcome, force=force, options=options, redact=redact)
    finally:
        shutil.rmtree(copy.parent, ignore_errors=True)
    res.path = str(unit.path)
    res.warnings = [w.replace(str(copy), str(unit.path)) for w in res.warnings]
    if res.error:
        res.error = res.error.replace(str(copy), str(unit.path))
    res.warnings.insert(0, f"{unit.path}: a stream (a pipe): read once, into a temporary copy of at most "
                           f"{inputs.STREAM_LIMIT // (1024 * 1024)} MiB")
    return res


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
        roots = [i for i in ids if store.session(i)["parent_id"] not in ids]
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
