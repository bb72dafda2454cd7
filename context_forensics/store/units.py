"""Import units and the two halves of ingesting one: read it (``parse_unit``, no store: on any
worker) and write what was read (``write_parsed``, the one writer, one transaction per unit).

``ingest.ingest_unit`` is the two halves in turn, the read lazy (``parse_unit(lazy=True)``: it
streams inside the write's transaction, so a 1 GB log is never held whole); a parallel ingest
(``parallel.py``) reads on an executor's workers and writes on the driver, skipping the units
the store already holds before any is read (``known_result``, from ``unit_hash_key``). What ``parse_unit`` returns
(``ParsedUnit``) is picklable: sessions with their messages as lists, checked (``gate``) and
redacted, the warnings and counts the ingest report shows. A value the store refuses rolls the
unit back and reads it again in careful mode (``gate``), where its file can be read.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
from collections import Counter
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path
from typing import Iterable, Iterator

from .. import importers
from ..errors import CtxfError, ExitCode, InputError, UnknownFormatError
from ..hashing import file_hash, short_id
from ..importers.base import NESTING_HINT, ImportContext, Importer, read_head, record_error_reason
from ..records import Message, Session
from . import inputs
from .db import Store, session_id
from .gate import careful_session, careful_source, check_session, repair_warnings
from .redact import Redactor


@dataclass
class FileResult:
    path: str
    format: str | None = None
    status: str = "ingested"  # ingested | partial | unchanged | failed | skipped
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
    # Stored in part only (``status`` "partial"): a record skipped for what it holds (a ``skipped``
    # key of ``PARTIAL_SKIPS``: "malformed message", "unreadable sample", "invalid JSON line", ...),
    # or records of kinds the importer does not know past ``PARTIAL_SHARE`` of the file's records.
    partial: bool = False
    # The file's records (the denominator): the messages stored from it plus the records skipped.
    records: int = 0
    # Of ``skipped``: the records not read (unreadable, or of a kind the importer does not know).
    unread: dict[str, int] = field(default_factory=dict)
    exit_code: int = 0

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "exit_code"}



@dataclass(frozen=True)
class Unit:
    path: Path
    importer: Importer | None  # None: detect failed (reported as unknown format)
    explicit: bool  # named on the command line (unknown format is then an error)
    stream: bool = False  # a pipe (/dev/stdin, <(...)): read once into a bounded copy
    problem: CtxfError | None = field(default=None, compare=False)  # not read at all: this is why
    companion: bool = False  # brought along by another unit's file (``Importer.companions``)



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



class _Careful(Exception):
    """The store refused a value of this unit: roll it back, read it again in careful mode."""



# ---------------------------------------------------------------- the two halves: read, write


@dataclass
class ParsedUnit:
    """One unit read, checked and redacted, ready for the store (``parse_unit``); picklable, so a
    worker process or a Ray task hands it to the one writer (``write_parsed``). Lazily parsed
    (``lazy``: the serial ingest), it is read as it is written, once, and is not picklable."""

    path: str  # as reported (``FileResult.path``)
    source: str  # the sessions' source to record
    explicit: bool = False
    format: str | None = None
    file_hash: str = ""  # the unit's hash with its options' and redaction's fingerprints
    size: int = 0
    # A list, messages as lists; lazy: one pass, as they stream (warnings and counts below at its end)
    sessions: list[Session] | _OnePass = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    skipped: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)  # of ``skipped``: kinds the importer does not know
    bad: int = 0  # records of unexpected shape (``ImportContext.bad``)
    first_bad: str | None = None
    redacted: dict[str, int] | None = None
    careful: bool = False  # read in careful mode (``gate``)
    failed: FileResult | None = None  # the unit could not be read: its failed result
    lazy: bool = False  # ``sessions`` is read as it is written (``parse_unit(lazy=True)``)


PARTIAL_SKIPS = ("malformed ", "unreadable ", "oversized ", "invalid ", "truncated ", "too deeply nested")
# A file whose records of kinds its importer does not know are more than this share of its records
# is stored in part only (status "partial"): a wrong importer, or a newer version of the format.
PARTIAL_SHARE = 0.10


def mark_partial(res: FileResult, unknown: dict[str, int]) -> None:
    """Set ``res``'s records, unread records and ``partial`` status from its messages and skipped
    records (``unknown``: the skipped kinds its importer did not know). Records: the messages stored
    plus every record skipped. Partial: any record unreadable (``PARTIAL_SKIPS``), or the records not
    read more than ``PARTIAL_SHARE`` of them."""
    res.unread = {k: n for k, n in res.skipped.items() if k.startswith(PARTIAL_SKIPS) or unknown.get(k)}
    res.records = res.messages + sum(res.skipped.values())
    unreadable = any(k.startswith(PARTIAL_SKIPS) for k in res.unread)
    res.partial = unreadable or sum(res.unread.values()) > PARTIAL_SHARE * res.records
    if res.partial and res.status == "ingested":
        res.status = "partial"
_REFUSED = (sqlite3.InterfaceError, sqlite3.ProgrammingError, UnicodeEncodeError, OverflowError)
# What reading or writing one unit may raise and the unit fails for, alone.
_CAUGHT = (CtxfError, sqlite3.Error, OSError, UnicodeError, OverflowError, MemoryError, RecursionError,
           ValueError, TypeError, KeyError, AttributeError, IndexError)
# Reading also ``Exception``: anything else a reader raises (a library's own error it did not turn
# into ctxf's: zipfile's RuntimeError for an encrypted member) is a defect of ctxf, reported as an
# internal error of that file, yet it never stops the files after it.
_READ_CAUGHT = (*_CAUGHT, Exception)
_LAYOUT = (ValueError, TypeError, LookupError, AttributeError)  # an importer met a shape it did not expect


def _redactor(redact: bool | Redactor) -> Redactor | None:
    return redact if isinstance(redact, Redactor) else Redactor() if redact else None


def shown_path(path: str, redact: bool | Redactor) -> str:
    """``path`` as ingest prints it (``Redactor.path``)."""
    red = _redactor(redact)
    return red.path(path) if red is not None else path


def shown(res: FileResult, redact: bool | Redactor) -> FileResult:
    """``res`` with the secrets in the paths it names (its own, its error's, its warnings', the
    sources of ``same_as``) replaced as ``Redactor.path`` does: what ingest prints and returns."""
    red = _redactor(redact)
    if red is None:
        return res
    res.path = red.path(res.path)
    if res.error:
        res.error = red.path(res.error)
    res.warnings = [red.path(w) for w in res.warnings]
    res.same_as = [{**s, "source": red.path(s.get("source", ""))} for s in res.same_as]
    return res


@lru_cache(maxsize=1)
def _default_fingerprint() -> str:
    return Redactor().fingerprint


def _importer(unit: Unit) -> Importer:
    if not unit.path.exists():
        raise InputError("no such file or directory", where=str(unit.path))
    if unit.importer is not None:
        return unit.importer
    head = read_head(unit.path)
    imp = importers.detect(unit.path, head)
    if imp is None:
        raise importers.unknown_format(unit.path, head)
    return imp


def unit_hash_key(unit: Unit, options: dict | None = None, redact: bool | Redactor = True) -> tuple[str, int]:
    """(the unit's file hash as the store records it, its size): its content's hash with the
    options it is read with and the redaction's fingerprint. Raises ``OSError`` when unreadable."""
    fhash, size = _unit_hash(unit.path)
    if options:  # the same file read with other options (e.g. --table) is another unit
        fhash = short_id(fhash, json.dumps(options, sort_keys=True), length=32)
    if redact:  # read with other redaction rules, a file is read again (never stored twice)
        fp = redact.fingerprint if isinstance(redact, Redactor) else _default_fingerprint()
        fhash = short_id(fhash, fp, length=32)
    return fhash, size


def known_result(store: Store, unit: Unit, *, options: dict | None = None, redact: bool | Redactor = True,
                 source: str | None = None, task: str | None = None, outcome: str | None = None,
                 force: bool = False) -> tuple[FileResult | None, tuple[str, int] | None]:
    """(the ``unchanged`` result of a unit the store already holds, or None; its hash key), before
    reading it. A unit that cannot even be hashed gives (None, None): reading it says why."""
    try:
        imp = _importer(unit)
        key = unit_hash_key(unit, options, redact)
        red = _redactor(redact)
        src = source or str(unit.path.resolve())
        return _unchanged(store, key[0], red.path(src) if red is not None else src, imp.name, str(unit.path),
                          task=task, outcome=outcome, force=force), key
    except _READ_CAUGHT:
        return None, None


def _unchanged(store: Store, fhash: str, source: str, fmt: str | None, path: str, *, task: str | None,
               outcome: str | None, force: bool) -> FileResult | None:
    if force or task is not None or outcome is not None:
        return None
    known = store.file_record(fhash)
    # A record listing a session no longer stored (left by `ctxf rm` before it forgot file
    # records) answers nothing: the file is read again.
    if known is None or store.missing_sessions(_json_list(known["sessions"])):
        return None
    res = FileResult(path=path, format=fmt, status="unchanged")
    res.sessions = _json_list(known["sessions"])
    res.messages = known["message_count"] or 0
    # A copy, or the same run through another path: say where the stored sessions are from.
    res.same_as = store.sources_other_than(res.sessions, source)
    return res


def parse_unit(unit: Unit, *, options: dict | None = None, redact: bool | Redactor = True,
               source: str | None = None, careful: bool = False, key: tuple[str, int] | None = None,
               lazy: bool = False) -> ParsedUnit:
    """Read one unit (no store): its sessions with their messages as lists, checked (``gate``) and
    redacted; never raises for bad input (``failed`` holds the failed result). ``source``: the
    source to record (default: the resolved path); ``key``: its ``unit_hash_key`` if known.

    ``lazy``: detect and hash now, read as ``write_parsed`` writes (one pass, never pickled):
    ``sessions`` streams, each session's messages too, checked and redacted as they go, so a
    1 GB log is never held whole; the warnings and counts are there once it is exhausted, and
    a read that fails midway fails the unit in ``write_parsed``, as it fails here when eager.
    """
    out = ParsedUnit(path=str(unit.path), source=source or "", explicit=unit.explicit, careful=careful)
    res = FileResult(path=str(unit.path))
    red = _redactor(redact)
    if red is not None:
        red.reset()
    repairs: Counter = Counter()  # careful mode's repairs, by kind
    try:
        try:
            imp = _importer(unit)
            out.format = res.format = imp.name
            out.file_hash, out.size = key or unit_hash_key(unit, options, red if red is not None else False)
            src = source or str(unit.path.resolve())
            if red is not None:  # a secret in a file's name is stored no more than one in its text
                src = red.path(src)
            out.source = careful_source(src, repairs) if careful else src
            stream = _read(unit, imp, out, red, repairs, options, lazy=lazy)
            if lazy:
                out.sessions, out.lazy = _OnePass(stream), True
                return out
            for session in stream:
                session.messages = list(session.messages)
                out.sessions.append(session)  # type: ignore[union-attr]
        except _ReadError as e:
            raise e.error from None
    except _READ_CAUGHT as e:
        try:
            _failure(res, e, explicit=unit.explicit, careful=careful)
        except _Careful:  # a value no store holds, met while reading: read it again, carefully
            return parse_unit(unit, options=options, redact=redact, source=source, careful=True, key=key, lazy=lazy)
        out.sessions, out.failed = [], res
    return out


class _ReadError(Exception):
    """Reading a lazily parsed unit raised ``error`` (one of ``_CAUGHT``): the unit's read failed,
    not its write (``write_parsed`` fails it as ``parse_unit`` fails an eager read)."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(error)
        self.error = error


class _OnePass:
    """A lazily parsed unit's sessions: read once, as they are written; not picklable (a worker
    parses eagerly)."""

    def __init__(self, stream: Iterator[Session]) -> None:
        self._stream, self._spent = stream, False

    def __iter__(self) -> Iterator[Session]:
        if self._spent:
            raise RuntimeError("a lazily parsed unit is read once: parse it again to write it again")
        self._spent = True
        return self._stream

    def close(self) -> None:
        """Let go of what the read holds (its open file) when the write stops before its end."""
        close = getattr(self._stream, "close", None)
        try:
            if close is not None:
                close()
        except (_ReadError, *_CAUGHT):  # the importer's clean-up failed: the unit's result stands
            pass

    def __reduce__(self) -> str | tuple:
        raise TypeError("a lazily parsed unit cannot be pickled: a worker calls parse_unit(lazy=False)")


def _read(unit: Unit, imp: Importer, out: ParsedUnit, red: Redactor | None, repairs: Counter,
          options: dict | None, *, lazy: bool) -> Iterator[Session]:
    """The unit's sessions as they stream, checked and redacted; when exhausted, ``out``'s warnings
    and counts. Raises ``_ReadError`` for what reading raised (``lazy``: its messages' reads too)."""
    careful = out.careful
    try:
        ctx = ImportContext(path=unit.path, options=options or {})
        sids: set[str | None] = set()
        for session in imp.parse(unit.path, ctx):
            if careful:  # the store refused a value of this file: repair as they stream
                careful_session(session, ctx, repairs)
            else:
                check_session(session, ctx)
            if red is not None:  # before anything of it is stored
                red.session(session)
            sid = _session_id(session)  # a global id (another id is its content's, known as it is written)
            if sid is not None and sid in sids:
                ctx.warn(f"session {session.external_id!r} appears twice; kept the last one")
            sids.add(sid)
            if lazy:
                session.messages = _reading(session.messages)
            yield session
        ctx.finish()
        repair_warnings(repairs, ctx)
        if red is not None:
            ctx.warnings[:] = [red.text(w) for w in ctx.warnings]
        if careful:  # the warnings name the file, whose name may not be UTF-8
            ctx.warnings[:] = [careful_source(w, repairs) for w in ctx.warnings]
        out.warnings, out.skipped, out.unknown = ctx.warnings, dict(ctx.skipped), dict(ctx.unknown)
        out.bad, out.first_bad = ctx.bad, ctx.first_bad
        if red is not None:
            out.redacted = dict(sorted(red.reset().items()))
    except _READ_CAUGHT as e:
        raise _ReadError(e) from e


def _reading(messages: Iterable[Message]) -> Iterator[Message]:
    """``messages`` as they stream, what reading them raises as a ``_ReadError`` (the store's
    own errors, raised between two of them, stay what they are)."""
    it = iter(messages)
    while True:
        try:
            m = next(it)
        except StopIteration:
            return
        except _READ_CAUGHT as e:
            raise _ReadError(e) from e
        yield m


def write_parsed(store: Store, parsed: ParsedUnit, *, task: str | None = None, outcome: str | None = None,
                 force: bool = False, unit: Unit | None = None, options: dict | None = None,
                 redact: bool | Redactor = True) -> FileResult:
    """Write one ``parse_unit`` result in one transaction; never raises for bad input.

    A unit the store already holds is ``unchanged``; a unit the store refuses a value of is rolled
    back and read again in careful mode, here (``unit``, else ``parsed.path``, with the
    ``options`` and ``redact`` it was read with); a unit not readable here then fails, saying so.
    """
    if parsed.failed is not None:
        return replace(parsed.failed)
    try:
        return _write(store, parsed, task=task, outcome=outcome, force=force, unit=unit, options=options,
                      redact=redact)
    finally:
        if isinstance(parsed.sessions, _OnePass):  # a write that stopped midway: close the read
            parsed.sessions.close()


def _write(store: Store, parsed: ParsedUnit, *, task: str | None, outcome: str | None, force: bool,
           unit: Unit | None, options: dict | None, redact: bool | Redactor) -> FileResult:
    res = FileResult(path=parsed.path, format=parsed.format)
    fhash, source = parsed.file_hash, parsed.source
    try:
        same = _unchanged(store, fhash, source, parsed.format, parsed.path, task=task, outcome=outcome, force=force)
        if same is not None:
            return same
        with store.transaction():
            produced: dict[str, str] = {}  # external id -> session id (the last, for a sub-session's link)
            written: dict[str, None] = {}  # the session ids this unit produced, in order
            changed: list[str] = []  # stored sessions whose content this unit rewrote
            twice: list[str] = []  # external ids of sessions this unit holds twice, the same content
            for session in parsed.sessions:
                if task is not None:
                    session.task = task
                if outcome is not None:
                    session.outcome = outcome
                parent = None
                if session.parent_external_id:
                    parent = produced.get(session.parent_external_id) or session_id(
                        session.format, session.parent_external_id
                    )
                w = store.write_session(session, sid=_session_id(session), source=source, source_hash=fhash,
                                        parent_id=parent)
                kept = sid = w.session_id
                if w.stored_source is not None:  # this run's content is stored already: nothing was written
                    if sid in written:  # this file held it before: once is enough
                        twice.append(session.external_id)
                        continue
                    store.relabel(sid, task=task, outcome=outcome)
                    if w.stored_source != source:
                        res.same_as.append({"session": sid, "source": w.stored_source})
                elif not session.global_id and w.messages:
                    # A store written before ids were their content's holds this run under an id of
                    # its path: the same run through another path keeps that one (an older version of
                    # this path's is stale, removed below).
                    same_run = store.same_run(sid, session.format, session.external_id, w.content_hash,
                                              other_than=source)
                    if same_run is not None and same_run["id"] not in written:
                        # The same run, stored from another path: keep that one, drop this copy
                        # (and any older version of it this path produced).
                        store.delete_sessions([sid])
                        store.relabel(same_run["id"], task=task, outcome=outcome)
                        kept = same_run["id"]
                        res.same_as.append({"session": kept, "source": same_run["source"]})
                if kept == sid and w.replaced and not w.unchanged:
                    changed.append(sid)
                produced[session.external_id] = kept
                written[kept] = None
                res.messages += w.messages
                res.replaced += int(w.replaced and not w.unchanged)
            if parsed.bad and not res.messages:  # every record it holds was of unexpected shape
                raise InputError(
                    f"nothing in this file could be read: {parsed.bad} record(s) of unexpected shape, all "
                    f"skipped; the first: {parsed.first_bad}",
                    where=parsed.path,
                    hint="if the format was guessed wrong, force one with --format",
                )
            res.sessions = list(written)
            res.replaced += store.remove_stale(source, res.sessions)
            # Records of other versions of this file list sessions it has just rewritten.
            store.forget_files(changed, keep_hash=fhash)
            if res.sessions and len(res.same_as) == len(res.sessions):
                res.status = "unchanged"  # every session was already stored: nothing new
            for ext in dict.fromkeys(twice):
                parsed.warnings.append(f"{parsed.path}: session {ext!r} appears twice with the same content; "
                                       "stored once")
            store.record_file(
                file_hash=fhash, path=source, fmt=parsed.format, size=parsed.size, sessions=res.sessions,
                messages=res.messages, warnings=parsed.warnings, skipped=parsed.skipped,
            )
        res.warnings = list(parsed.warnings)
        res.redacted = parsed.redacted
        res.skipped = dict(parsed.skipped)
        mark_partial(res, parsed.unknown)
        if not res.sessions:
            res.warnings.append(f"{parsed.path}: no sessions found in this file")
    except _ReadError as e:  # a lazy read failed midway (rolled back): the unit fails as an eager read does
        res = FileResult(path=parsed.path, format=parsed.format)
        return _failed_unit(store, parsed, res, e.error, unit=unit, options=options, redact=redact,
                            task=task, outcome=outcome, force=force)
    except _CAUGHT as e:
        return _failed_unit(store, parsed, res, e, unit=unit, options=options, redact=redact,
                            task=task, outcome=outcome, force=force)
    return res


def _failed_unit(store: Store, parsed: ParsedUnit, res: FileResult, e: BaseException, *, unit: Unit | None,
                 options: dict | None, redact: bool | Redactor, **kwargs: object) -> FileResult:
    """``res`` failed for ``e`` (raised reading or writing), or, for a value the store refuses,
    the unit read again here in careful mode."""
    try:
        _failure(res, e, explicit=parsed.explicit, careful=parsed.careful)
    except _Careful:
        if isinstance(parsed.sessions, _OnePass):
            parsed.sessions.close()  # before the file is read again
        return _write_careful(store, parsed, res, unit=unit, options=options, redact=redact, **kwargs)
    return res


def _write_careful(store: Store, parsed: ParsedUnit, res: FileResult, *, unit: Unit | None,
                   options: dict | None, redact: bool | Redactor, **kwargs: object) -> FileResult:
    """The store refused a value of ``parsed`` (rolled back): read it again here in careful mode."""
    if unit is None:
        path = Path(parsed.path)
        unit = Unit(path, importers.get(parsed.format) if parsed.format else None, parsed.explicit)
    if not unit.path.exists():
        _fail(res, InputError("a value in this file cannot be stored, and the file is not readable on this "
                              "machine to read it again in careful mode (which repairs such values)",
                              where=parsed.path, hint="ingest this file on a machine that can read it"),
              ExitCode.ERROR)
        return res
    again = parse_unit(unit, options=options, redact=redact, source=parsed.source, careful=True,
                       key=(parsed.file_hash, parsed.size), lazy=parsed.lazy)
    return write_parsed(store, again, unit=unit, options=options, redact=redact, **kwargs)  # type: ignore[arg-type]


def _failure(res: FileResult, e: BaseException, *, explicit: bool, careful: bool) -> None:
    """Fail ``res`` for ``e`` (one of ``_CAUGHT``); a value the store cannot hold (a lone
    surrogate, an integer beyond 64 bits, a type it does not bind) raises ``_Careful`` unless
    already careful (careful mode repairs such values)."""
    where = res.path
    if isinstance(e, UnknownFormatError):
        _fail(res, e, ExitCode.USAGE if explicit else ExitCode.ERROR)
    elif isinstance(e, CtxfError):
        _fail(res, e, ExitCode.ERROR)
    elif isinstance(e, _REFUSED):
        if not careful:
            raise _Careful from e
        _fail(res, InputError(f"a value in this file cannot be stored ({record_error_reason(e)})",
                              where=where, hint="please report this file"), ExitCode.ERROR)
    elif isinstance(e, sqlite3.Error):
        _fail(res, CtxfError(f"store write failed: {e}", where=where), ExitCode.ERROR)
    elif isinstance(e, OSError):
        message, hint = inputs.os_error_message(e)
        _fail(res, InputError(message, where=where, hint=hint), ExitCode.ERROR)
    elif isinstance(e, UnicodeError):
        _fail(res, InputError(f"cannot read: {e}", where=where), ExitCode.ERROR)
    elif isinstance(e, MemoryError):  # rolled back; what the file's parse held is freed as this unwinds
        _fail(res, InputError("ran out of memory reading this file; nothing of it was stored", where=where,
                              hint="ingest it alone, or on a machine with more memory; a small archive that "
                              "inflates to gigabytes is a decompression bomb"), ExitCode.ERROR)
    elif isinstance(e, RecursionError):  # the readers bound nesting (importers/_json.py): the last line of defence
        _fail(res, InputError("cannot read: a value in this file is nested too deeply", where=where,
                              hint=NESTING_HINT), ExitCode.ERROR)
    elif isinstance(e, _LAYOUT):
        # The importer met a shape it did not expect outside any one record (its records are
        # skipped one by one): this file's failure, saying what it met.
        _fail(res, InputError(
            f"cannot read this file as {res.format}: its layout has an unexpected type or shape "
            f"({record_error_reason(e)})", where=where,
            hint="if the format was guessed wrong, force one with --format; otherwise please report this file",
        ), ExitCode.ERROR)
    else:  # a defect of ctxf: this file fails, by name, and the batch goes on
        _fail(res, CtxfError(
            f"internal error reading this file ({type(e).__name__}: {e}); nothing of it was stored, the other "
            "files are read", where=where, hint="please report this file",
        ), ExitCode.ERROR)


def _session_id(session: Session) -> str | None:
    """The session's id when its external id is global (unique across files, by its format's
    word); else None: the id is its content's, known once the store has written it."""
    return session_id(session.format, session.external_id) if session.global_id else None


def _fail(res: FileResult, e: CtxfError, code: ExitCode) -> None:
    res.status = "failed"
    res.error = str(e)
    res.exit_code = int(code)
    res.sessions = []
    res.messages = 0


def _json_list(text: str | None) -> list[str]:
    return json.loads(text) if text else []


