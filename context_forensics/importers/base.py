"""The importer contract, the registry, and the readers every importer shares.

An importer is a class registered with ``@register``. It says whether it can read a path
(``sniff``) and turns the path into ``Session`` records (``parse``). Readers here give
every format the same behaviour on bad input: errors name the file, line and column;
a bad JSONL line (truncated last line, invalid JSON elsewhere, nested past ``_json.MAX_DEPTH``)
and invalid UTF-8 are warnings that name the line, with the line skipped and counted; nothing
half-parsed leaks out. Every value they return went through the guard of ``_json`` (bounded
nesting, lone surrogates replaced). A record whose shape breaks an importer's conversion is
skipped the same way: the importer catches ``RECORD_ERRORS`` around one record and hands the
error to ``ImportContext.bad_record``, which warns with the record's place and counts it; the
ingest rejects a file only when nothing in it could be read. The
value helpers (``as_int``, ``as_str``, ``text_of``, ``json_text``, ``epoch_iso``, ...) read the
loosely typed fields of a log record the same way everywhere.
"""

from __future__ import annotations

import functools
import json
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator, TypeVar

import orjson

from ..errors import InputError
from ..plugins import GROUPS, Registry
from ..records import Session
from ._json import (  # noqa: F401 - decode: importers take it from here
    MAX_DEPTH,
    IntGuard,
    NestingError,
    decode,
    nested_too_deep,
    nesting_error,
    parse_json,
    scrub,
)
from ._reasons import json_error_reason, record_error_reason  # noqa: F401 - importers take them from here
from ._text import MAX_KIND, MAX_WARNING, short

HEAD_BYTES = 64 * 1024

_IMPORTERS: Registry["Importer"] = Registry("importer", GROUPS["importer"])
_REGISTRY = _IMPORTERS.items  # name -> importer


class Importer:
    """Base class for a log format. Subclasses set the class attributes and two methods."""

    name: ClassVar[str]  # format name used by --format and stored on sessions
    description: ClassVar[str]  # one line for the formats table
    extensions: ClassVar[tuple[str, ...]] = ()  # hint only; sniff decides
    # Lower runs first in auto-detection: specific formats before generic ones (``importers``: the
    # rule, and the bands: an agent's or harness's own log 15-29, a benchmark's 30-59, a shared
    # schema 60-69, a provider's request shape 70-79, a fallback 80-99).
    priority: ClassVar[int] = 50
    # A fallback reads any file of a broad shape (a list of role/content turns, a table of rows):
    # it claims a file only when no other importer does (``importers.claimants``).
    fallback: ClassVar[bool] = False
    # True when the importer reads a directory as one unit (OpenHands llm_completions/).
    handles_directories: ClassVar[bool] = False

    def sniff(self, path: Path, head: bytes) -> bool:
        """Cheap check on the first bytes (``head``; empty for a directory)."""
        raise NotImplementedError

    def parse(self, path: Path, ctx: "ImportContext") -> Iterator[Session]:
        """Yield the sessions in ``path``. Raise ``InputError`` for a file that cannot be read."""
        raise NotImplementedError

    def sidecars(self, path: Path) -> list[Path]:
        """Files next to ``path`` that this importer consumed (report.json, eval logs).

        A directory walk does not report them as unknown files.
        """
        return []

    def companions(self, path: Path) -> list[Path]:
        """Logs of their own that belong with ``path`` (a Claude Code session's sub-agent
        transcripts): ingesting ``path`` ingests them too, each as a unit of its own, once.

        Looked up from the path alone (no file is read), for every file ingested.
        """
        return []


_C = TypeVar("_C")


def register(cls: _C) -> _C:
    """Class decorator: add an importer to the registry under ``cls.name``.

    Its ``sniff`` is wrapped so that content it did not expect (a head nested too deep, a list
    where it looked for a string: ``RECORD_ERRORS``) is a "no", never an exception; OSError
    (the file cannot be read) still propagates.
    """
    if not (isinstance(cls, type) and issubclass(cls, Importer)):
        raise TypeError(f"{cls!r} is not a subclass of context_forensics.Importer")
    name = getattr(cls, "name", None)
    if name in _REGISTRY:
        raise ValueError(f"importer {name!r} registered twice")
    sniff = cls.__dict__.get("sniff")
    if sniff is not None and not getattr(sniff, "_guarded", False):
        # a function is a method once set on the class; mypy sees only a Callable attribute
        cls.sniff = _guarded_sniff(sniff)  # type: ignore[method-assign, assignment]
    _IMPORTERS.add(name, cls())
    return cls


def load_plugins() -> None:
    """Register the importers of the installed packages' ``ctxf.importers`` entry points (once)."""
    def adopt(cls: object) -> None:
        if cls not in {type(i) for i in _REGISTRY.values()}:
            register(cls)

    _IMPORTERS.load_plugins(adopt)


def _guarded_sniff(sniff: Callable[[Importer, Path, bytes], bool]) -> Callable[[Importer, Path, bytes], bool]:
    @functools.wraps(sniff)
    def guarded(self: Importer, path: Path, head: bytes) -> bool:
        try:
            return sniff(self, path, head)
        except OSError:
            raise
        except RECORD_ERRORS:
            return False

    guarded._guarded = True  # type: ignore[attr-defined]
    return guarded


def registered() -> dict[str, Importer]:
    """The importers registered so far, in detection order (``importers.registry()`` first
    imports every format module, so that each registers itself)."""
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (kv[1].priority, kv[0])))


# What a record of unexpected shape raises inside an importer's conversion (a list where an id
# belongs, a number where a string does, nesting too deep): that record is skipped, not the file.
RECORD_ERRORS = (AttributeError, LookupError, OverflowError, RecursionError, TypeError, ValueError)


@dataclass
class ImportContext:
    """What an importer may tell the caller while parsing: warnings and skipped records."""

    path: Path
    warnings: list[str] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    # Of ``skipped``: records of kinds the importer does not know (``skip(..., unknown=True)``);
    # past ``units.PARTIAL_SHARE`` of a file's records they make the file ``partial``.
    unknown: Counter = field(default_factory=Counter)
    options: dict[str, Any] = field(default_factory=dict)  # e.g. {"table": "logs"}
    bad: int = 0  # records skipped by ``bad_record``
    first_bad: str | None = None  # the first of them: its place and reason
    inflated: int = 0  # bytes decompressed from this file so far (``_inflate``: bounded per file)

    def warn(self, message: str, *, line: int | None = None) -> None:
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        self.warnings.append(f"{where}: {short(message, MAX_WARNING)}")

    def skip(self, what: str, n: int = 1, *, unknown: bool = False) -> None:
        """Count a record not imported: one the importer knows and sets aside (progress events,
        snapshots, duplicates: the model never saw them), or, ``unknown``, one of a kind it does
        not know (an item type, a role, a part it has no reading for), which may hold what the
        model saw: counted apart, against the file (``FileResult.unread``). A kind is a name: one
        made of a log's value (``item type '...'``) is cut to MAX_KIND characters."""
        what = short(what, MAX_KIND)
        self.skipped[what] += n
        if unknown:
            self.unknown[what] += n

    def bad_record(self, error: BaseException, *, what: str = "record", line: int | None = None,
                   index: int | str | None = None) -> None:
        """Skip, count and warn about one record whose shape broke the conversion (``error``,
        one of ``RECORD_ERRORS``): its place is ``line`` (of the file) or ``index`` (in a list)."""
        self.bad += 1
        place = f"{what} {index}" if index is not None else what
        reason = record_error_reason(error)
        if self.first_bad is None:
            self.first_bad = f"{place}{f' (line {line})' if line is not None else ''}: {reason}"
        if self.bad <= LINE_WARNINGS:
            self.warn(f"{place}: {reason}; skipped it, kept the rest", line=line)
        self.skip(f"malformed {what}")

    @contextmanager
    def record(self, what: str = "record", *, line: int | None = None,
               index: int | str | None = None) -> Iterator[None]:
        """``with ctx.record("conversation", index=i): ...``: a record-sized block whose
        ``RECORD_ERRORS`` skip the record (``bad_record``) and let the loop go on. For loops
        that run once per line of a large file, catch ``RECORD_ERRORS`` inline instead."""
        try:
            yield
        except RECORD_ERRORS as e:
            self.bad_record(e, what=what, line=line, index=index)

    def finish(self) -> None:
        """Called once the file is read: sums up the bad records not warned about one by one."""
        if self.bad > LINE_WARNINGS:
            self.warn(f"{self.bad - LINE_WARNINGS} more malformed record(s) skipped (the first "
                      f"{LINE_WARNINGS} are listed above)")


# ---------------------------------------------------------------- readers


def read_head(path: Path, n: int = HEAD_BYTES) -> bytes:
    if path.is_dir():
        return b""
    with open(path, "rb") as f:
        return f.read(n)


NESTING_HINT = (f"no log format nests lists or objects deeper than {MAX_DEPTH} levels: the file is corrupt "
                "or not a log")


def _json_error(path: Path, e: json.JSONDecodeError, *, line: int | None = None) -> InputError:
    lineno = line if line is not None else e.lineno
    where = f"{path}:{lineno}:{e.colno}"
    if isinstance(e, NestingError):
        return InputError(f"cannot read: JSON {e.msg}", where=where, hint=NESTING_HINT)
    return InputError(
        f"malformed JSON: {json_error_reason(e)}",
        where=where,
        hint="the file must be valid JSON; check the log was fully written, or force another "
        "format with --format",
    )


def load_json(path: Path, ctx: ImportContext) -> Any:
    """Read a whole JSON document (through the guard of ``_json``). Errors carry file, line
    and column."""
    data = path.read_bytes()
    if not data.strip():
        raise InputError("empty file", where=str(path), hint="nothing to ingest; check the export")
    try:
        # Malformed or not UTF-8: the standard parser behind orjson reports line and column.
        return parse_json(data[3:] if data.startswith(b"\xef\xbb\xbf") else data, ctx)
    except json.JSONDecodeError as e:
        raise _json_error(path, e) from None


def loads_line(raw: bytes, ctx: ImportContext | None, line: int) -> Any:
    """json.loads on a raw JSONL line, through the guard of ``_json``; invalid UTF-8 and lone
    surrogates are replaced (warned when ``ctx`` is given). Raises ``json.JSONDecodeError``
    (``NestingError`` for a line nested too deep)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    return parse_json(raw, ctx, line=line)


SKIP: Any = object()  # JsonlLines.slow: the line holds no value

# Invalid lines warned about one by one; the rest of a file's are counted in one warning.
LINE_WARNINGS = 20


class JsonlLines:
    """The line rules of ``iter_jsonl_at``, for a loop that reads a JSONL file itself.

    Blank lines are skipped. A line that is not valid JSON is skipped and counted, with a
    warning naming its line and the whole reason, and the rest of the file is kept: a
    malformed *last* line is what a crashed writer leaves ("truncated line"), one elsewhere
    a corrupt record ("invalid JSON line"). Only a file none of whose lines could be read is
    an error. The loop tries ``orjson.loads`` on each raw line and hands this object only the
    lines it fails on (blank lines, a BOM, invalid UTF-8, malformed JSON: where orjson
    succeeds, ``loads_line`` would return the same value)::

        lines = JsonlLines(path, ctx)
        for lineno, raw in enumerate(f, start=1):
            try:
                value = orjson.loads(raw)
            except orjson.JSONDecodeError:
                value = lines.slow(raw, lineno)
                if value is SKIP:
                    continue
            else:
                if nested_too_deep(raw, value):  # the guard orjson leaves to ``lines``
                    lines.deep(raw, lineno)
                    continue
                if lines.pending is not None:
                    lines.skip_pending()
                lines.any_line = True
            ...
        lines.finish()
    """

    __slots__ = ("any_line", "bad", "ctx", "first_bad", "path", "pending", "rejected")

    def __init__(self, path: Path, ctx: ImportContext) -> None:
        self.path = path
        self.ctx = ctx
        # A bad line not yet known to be the last one, and its error.
        self.pending: tuple[int, json.JSONDecodeError] | None = None
        self.any_line = False  # a line was read as JSON
        self.bad = 0  # invalid lines skipped before the last one
        self.first_bad: tuple[int, json.JSONDecodeError] | None = None
        self.rejected = 0  # the last line skipped as nested too deep (``reject``)

    def skip_pending(self) -> None:
        """The bad line is followed by more data: not a truncation. Skip it, count it, say so."""
        assert self.pending is not None
        lineno, e = self.pending
        self.pending = None
        self.bad += 1
        if self.bad <= LINE_WARNINGS:
            self.ctx.warn(f"invalid JSON ({json_error_reason(e)}); skipped this line, kept the rest",
                          line=lineno)
        self.ctx.skip("invalid JSON line")

    def slow(self, raw: bytes, lineno: int) -> Any:
        """The value of a line orjson did not take, or SKIP (blank, nested too deep: skipped,
        or malformed: pending)."""
        if not raw.strip():
            return SKIP
        if self.pending is not None:
            self.skip_pending()
        try:
            # Without its line ending, an error at the end of the line says its real column.
            value = loads_line(raw.rstrip(b"\r\n"), self.ctx, lineno)
        except NestingError as e:
            return self.reject(lineno, e)
        except json.JSONDecodeError as e:
            self.pending = (lineno, e)
            if self.first_bad is None:
                self.first_bad = self.pending
            return SKIP
        self.any_line = True
        return value

    def deep(self, raw: bytes, lineno: int) -> Any:
        """SKIP for a line orjson read that nests past ``MAX_DEPTH`` (``nested_too_deep``)."""
        if self.pending is not None:
            self.skip_pending()
        return self.reject(lineno, nesting_error(raw))

    def reject(self, lineno: int, e: NestingError) -> Any:
        """A whole line of JSON nested too deep to read: skipped and counted now (it is no
        truncation), with a warning naming its line."""
        self.bad += 1
        self.rejected = lineno
        if self.first_bad is None:
            self.first_bad = (lineno, e)
        if self.bad <= LINE_WARNINGS:
            self.ctx.warn(f"JSON {e.msg} (at column {e.colno}); skipped this line, kept the rest", line=lineno)
        self.ctx.skip("too deeply nested line")
        return SKIP

    def finish(self) -> None:
        if not self.any_line:
            if self.first_bad is not None:
                lineno, e = self.first_bad
                bad = self.bad + (self.pending is not None)
                deep = isinstance(e, NestingError)
                raise InputError(
                    f"no line could be read: {bad} line(s), none {'readable' if deep else 'valid'} JSON; "
                    f"line {lineno}: {json_error_reason(e)}",
                    where=f"{self.path}:{lineno}:{e.colno}",
                    hint=NESTING_HINT if deep else "the file must hold one JSON value per line; check the "
                    "log was written whole, or force another format with --format",
                )
            raise InputError("empty file", where=str(self.path), hint="nothing to ingest; check the export")
        if self.bad > LINE_WARNINGS:
            self.ctx.warn(f"{self.bad - LINE_WARNINGS} more invalid JSON line(s) skipped (the first "
                          f"{LINE_WARNINGS} are listed above)")
        if self.pending is not None:
            lineno, e = self.pending
            self.ctx.warn(
                f"last line is truncated or malformed ({json_error_reason(e)}; a crashed writer?); "
                "ignored it and kept the lines before it",
                line=lineno,
            )
            self.ctx.skip("truncated line")


def iter_jsonl_at(path: Path, ctx: ImportContext) -> Iterator[tuple[int, int, Any]]:
    """Stream ``(line_number, byte_offset, value)`` from a JSONL file, one line in memory at a time.

    Blank lines are skipped; a line that is not valid JSON is skipped, counted and warned
    about (see ``JsonlLines``). The byte offset lets a two-pass importer come back to a record with ``seek``.
    """
    lines = JsonlLines(path, ctx)
    offset = 0
    fast_loads, fast_error = orjson.loads, orjson.JSONDecodeError
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            start = offset
            offset += len(raw)
            try:
                value = fast_loads(raw)
            except fast_error:
                value = lines.slow(raw, lineno)
                if value is SKIP:
                    continue
            else:
                if nested_too_deep(raw, value):
                    lines.deep(raw, lineno)
                    continue
                if lines.pending is not None:
                    lines.skip_pending()
                lines.any_line = True
            yield lineno, start, value
    lines.finish()


def iter_jsonl(path: Path, ctx: ImportContext) -> Iterator[tuple[int, Any]]:
    """Stream ``(line_number, value)`` from a JSONL file (see ``iter_jsonl_at``)."""
    for lineno, _, value in iter_jsonl_at(path, ctx):
        yield lineno, value


def first_jsonl_value(path: Path) -> tuple[int, Any] | None:
    """The first ``(line_number, value)`` of a JSONL file, for an importer that looks at it to
    pick a layout and then reads the whole file with its own context: the look reports nothing,
    so a bad line before the first value is warned about and counted once, by that read."""
    return next(iter_jsonl(path, ImportContext(path=path)), None)


def head_text(head: bytes) -> str:
    return head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()


def first_jsonl_record(head: bytes) -> dict[str, Any] | None:
    """The first JSON object in a JSONL head, or None (for sniffing)."""
    line = head_text(head).split("\n", 1)[0]
    try:
        value = parse_json(line)
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


def text_of(content: Any) -> str:
    """Plain text from a content value that may be a string, a list of parts or None."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out = []
        for p in content:
            if isinstance(p, str):
                out.append(p)
            elif isinstance(p, dict):
                t = p.get("text")
                if isinstance(t, str):
                    out.append(t)
        return "\n".join(out)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return content["text"]
    return json.dumps(content, ensure_ascii=False)


def json_text(value: Any) -> str:
    """A value as text: a string as it is, None as "", anything else as JSON (tool-call
    arguments, tool outputs)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def as_dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a dict, else an empty one (for optional sub-objects of a log record)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """``value`` if it is a list, else an empty one."""
    return value if isinstance(value, list) else []


def as_str(value: Any) -> str | None:
    """``value`` if it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None


def str_or_none(value: Any) -> str | None:
    """``value`` if it is a string (empty or not), else None."""
    return value if isinstance(value, str) else None


def dig(d: Any, *keys: str) -> Any:
    """The value under ``keys`` in nested dicts, or None where one is missing or not a dict."""
    for key in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return d


def as_int(value: Any) -> int | None:
    """An int from a usage field, or None for missing / non-numeric values and for values no
    SQLite integer holds (a corrupt count of 2**70 tokens is no count at all)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and -_INT64 <= value < _INT64:
        return value
    return None


_INT64 = 2**63


def int_text(value: Any) -> int | None:
    """An int from a decimal text ("42", "-7": ASCII digits, 20 at most, as a 64-bit count or an
    OTLP ``intValue`` is written), else None; never ``int()`` of thousands of digits (a ValueError)."""
    if not isinstance(value, str) or not 0 < len(value.lstrip("-")) <= 20:
        return None
    digits = value[1:] if value.startswith("-") else value
    return int(value) if digits.isascii() and digits.isdigit() else None


def epoch_iso(value: Any) -> str | None:
    """An ISO-8601 UTC string from a unix timestamp (seconds), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(value, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None
