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
"""

from __future__ import annotations

import json
import os
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from .. import importers
from ..errors import CtxfError, ExitCode, InputError, NotFoundError, UnknownFormatError, UsageError
from ..hashing import file_hash, short_id
from ..importers.base import ImportContext, Importer, read_head
from ..records import OUTCOMES, Session
from .db import Store, session_id
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


def expand(paths: Iterable[str | Path], *, fmt: str | None, recursive: bool) -> tuple[list[Unit], list[str]]:
    """Turn command-line paths into import units; return (units, ignored walked files)."""
    forced = importers.get(fmt) if fmt else None
    units: list[Unit] = []
    walked: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if not p.exists():
            units.append(Unit(p, None, True))
            continue
        if p.is_dir():
            imp = forced if forced and forced.handles_directories else _dir_importer(p)
            if imp is not None:
                units.append(Unit(p, imp, True))
                continue
            walked.extend(_walk(p, recursive, units))
        else:
            units.append(Unit(p, forced, True))
    ignored: list[str] = []
    sidecars: set[Path] = set()
    pending: list[Unit] = []
    for f in walked:
        imp = forced or importers.detect(f)
        if imp is None:
            ignored.append(str(f))
        else:
            pending.append(Unit(f, imp, False))
            sidecars.update(s.resolve() for s in imp.sidecars(f))
    for u in units:
        if u.importer is not None:
            sidecars.update(s.resolve() for s in u.importer.sidecars(u.path))
    units.extend(pending)
    ignored = [f for f in ignored if Path(f).resolve() not in sidecars]
    return units, ignored


def _walk(root: Path, recursive: bool, units: list[Unit]) -> list[Path]:
    """Files under ``root``; directories an importer reads whole become units themselves."""
    files: list[Path] = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            imp = _dir_importer(entry)
            if imp is not None:
                units.append(Unit(entry, imp, False))
            elif recursive:
                files.extend(_walk(entry, recursive, units))
        elif entry.is_file():
            files.append(entry)
    return files


def _unit_hash(path: Path) -> tuple[str, int]:
    if path.is_file():
        return file_hash(path), path.stat().st_size
    parts, size = [], 0
    for dirpath, _, names in sorted(os.walk(path)):
        for n in sorted(names):
            f = Path(dirpath) / n
            parts.append(f"{f.relative_to(path)}={file_hash(f)}")
            size += f.stat().st_size
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
    units, ignored = expand(paths, fmt=fmt, recursive=recursive)
    report = IngestReport(ignored=ignored)
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
    res = FileResult(path=str(unit.path))
    red = redact if isinstance(redact, Redactor) else Redactor() if redact else None
    if red is not None:
        red.reset()
    try:
        if not unit.path.exists():
            raise InputError("no such file or directory", where=str(unit.path))
        imp = unit.importer
        if imp is None:
            imp = importers.detect(unit.path, read_head(unit.path))
            if imp is None:
                raise importers.unknown_format(unit.path)
        res.format = imp.name
        fhash, size = _unit_hash(unit.path)
        if options:  # the same file read with other options (e.g. --table) is another unit
            fhash = short_id(fhash, json.dumps(options, sort_keys=True), length=32)
        if red is not None:  # read with other redaction rules, a file is read again (never stored twice)
            fhash = short_id(fhash, red.fingerprint, length=32)
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
            res.same_as = store.sources_other_than(res.sessions, str(unit.path.resolve()))
            return res
        ctx = ImportContext(path=unit.path, options=options or {})
        source = str(unit.path.resolve())
        with store.transaction():
            produced: dict[str, str] = {}  # external id -> session id
            changed: list[str] = []  # stored sessions whose content this unit rewrote
            for session in imp.parse(unit.path, ctx):
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
            res.sessions = list(dict.fromkeys(produced.values()))
            res.replaced += store.remove_stale(source, res.sessions)
            # Records of other versions of this file list sessions it has just rewritten.
            store.forget_files(changed, keep_hash=fhash)
            if res.sessions and len(res.same_as) == len(res.sessions):
                res.status = "unchanged"  # every session was already stored: nothing new
            if red is not None:
                ctx.warnings[:] = [red.text(w) for w in ctx.warnings]
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
    except sqlite3.Error as e:
        _fail(res, CtxfError(f"store write failed: {e}", where=str(unit.path)), ExitCode.ERROR)
    except (OSError, UnicodeError) as e:
        _fail(res, InputError(f"cannot read: {e}", where=str(unit.path)), ExitCode.ERROR)
    except OverflowError as e:  # e.g. summed token counts beyond what SQLite's integers hold
        _fail(res, InputError(f"a number in this file is too large to store ({e})", where=str(unit.path),
                              hint="check the file's usage / token count fields"), ExitCode.ERROR)
    except (ValueError, TypeError, KeyError, AttributeError, IndexError) as e:
        # An importer met a shape it did not expect: report it as this file's failure.
        _fail(
            res,
            InputError(
                f"unexpected content for format {res.format}: {type(e).__name__}: {e}",
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
            if res.status == "failed":
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
