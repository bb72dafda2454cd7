"""The importer contract, the registry, and the readers every importer shares.

An importer is a class registered with ``@register``. It says whether it can read a path
(``sniff``) and turns the path into ``Session`` records (``parse``). Readers here give
every format the same behaviour on bad input: errors name the file, line and column;
a bad JSONL line (truncated last line, invalid JSON elsewhere) and invalid UTF-8 are warnings
that name the line, with the line skipped and counted; nothing half-parsed leaks out. The
value helpers (``as_int``, ``as_str``, ``text_of``, ``json_text``, ``epoch_iso``, ...) read the
loosely typed fields of a log record the same way everywhere.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, ClassVar, Iterator

import orjson

from ..errors import InputError
from ..records import Session

HEAD_BYTES = 64 * 1024

_REGISTRY: dict[str, "Importer"] = {}


class Importer:
    """Base class for a log format. Subclasses set the class attributes and two methods."""

    name: ClassVar[str]  # format name used by --format and stored on sessions
    description: ClassVar[str]  # one line for the formats table
    extensions: ClassVar[tuple[str, ...]] = ()  # hint only; sniff decides
    # Lower runs first in auto-detection: specific formats before generic ones.
    priority: ClassVar[int] = 50
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


def register(cls: type[Importer]) -> type[Importer]:
    """Class decorator: add an importer to the registry under ``cls.name``."""
    if cls.name in _REGISTRY:
        raise ValueError(f"importer {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls()
    return cls


def registered() -> dict[str, Importer]:
    """The importers registered so far, in detection order (``importers.registry()`` first
    imports every format module, so that each registers itself)."""
    return dict(sorted(_REGISTRY.items(), key=lambda kv: (kv[1].priority, kv[0])))


@dataclass
class ImportContext:
    """What an importer may tell the caller while parsing: warnings and skipped records."""

    path: Path
    warnings: list[str] = field(default_factory=list)
    skipped: Counter = field(default_factory=Counter)
    options: dict[str, Any] = field(default_factory=dict)  # e.g. {"table": "logs"}

    def warn(self, message: str, *, line: int | None = None) -> None:
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        self.warnings.append(f"{where}: {message}")

    def skip(self, what: str, n: int = 1) -> None:
        """Count a record deliberately not imported (progress events, snapshots, ...)."""
        self.skipped[what] += n


# ---------------------------------------------------------------- readers


def read_head(path: Path, n: int = HEAD_BYTES) -> bytes:
    if path.is_dir():
        return b""
    with open(path, "rb") as f:
        return f.read(n)


def decode(data: bytes, ctx: ImportContext, *, line: int | None = None) -> str:
    """UTF-8 decode; invalid bytes become U+FFFD and a warning, never an exception."""
    try:
        return data.decode("utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as e:
        ctx.warn(f"invalid UTF-8 at byte {e.start}; replaced with U+FFFD", line=line)
        return data.decode("utf-8", errors="replace")


def json_error_reason(e: json.JSONDecodeError) -> str:
    """The whole reason of a JSON error, with its column.

    ``e.msg`` leaves the position out, and some messages stop on it ("Invalid control
    character at"): printed alone they read as cut off.
    """
    return f"{e.msg}{'' if e.msg.endswith(' at') else ' at'} column {e.colno}"


def _json_error(path: Path, e: json.JSONDecodeError, *, line: int | None = None) -> InputError:
    lineno = line if line is not None else e.lineno
    where = f"{path}:{lineno}:{e.colno}"
    return InputError(
        f"malformed JSON: {json_error_reason(e)}",
        where=where,
        hint="the file must be valid JSON; check the log was fully written, or force another "
        "format with --format",
    )


def load_json(path: Path, ctx: ImportContext) -> Any:
    """Read a whole JSON document. Errors carry file, line and column."""
    data = path.read_bytes()
    if not data.strip():
        raise InputError("file is empty", where=str(path), hint="nothing to ingest; check the export")
    try:
        return orjson.loads(data[3:] if data.startswith(b"\xef\xbb\xbf") else data)
    except orjson.JSONDecodeError:
        pass  # malformed or not UTF-8: the standard parser reports line and column
    text = decode(data, ctx)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise _json_error(path, e) from None


def loads_line(raw: bytes, ctx: ImportContext | None, line: int) -> Any:
    """json.loads on a raw JSONL line; invalid UTF-8 is replaced (warned when ``ctx`` is given)."""
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    try:
        return orjson.loads(raw)  # the fast path: bytes straight in
    except orjson.JSONDecodeError:
        pass  # malformed or not UTF-8: the standard parser says which, with line and column
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        if ctx is None:
            return json.loads(raw.decode("utf-8", errors="replace"))
        return json.loads(decode(raw, ctx, line=line))


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
                if lines.pending is not None:
                    lines.skip_pending()
                lines.any_line = True
            ...
        lines.finish()
    """

    __slots__ = ("any_line", "bad", "ctx", "first_bad", "path", "pending")

    def __init__(self, path: Path, ctx: ImportContext) -> None:
        self.path = path
        self.ctx = ctx
        # A bad line not yet known to be the last one, and its error.
        self.pending: tuple[int, json.JSONDecodeError] | None = None
        self.any_line = False  # a line was read as JSON
        self.bad = 0  # invalid lines skipped before the last one
        self.first_bad: tuple[int, json.JSONDecodeError] | None = None

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
        """The value of a line orjson did not take, or SKIP (blank, or malformed: pending)."""
        if not raw.strip():
            return SKIP
        if self.pending is not None:
            self.skip_pending()
        try:
            # Without its line ending, an error at the end of the line says its real column.
            value = loads_line(raw.rstrip(b"\r\n"), self.ctx, lineno)
        except json.JSONDecodeError as e:
            self.pending = (lineno, e)
            if self.first_bad is None:
                self.first_bad = self.pending
            return SKIP
        self.any_line = True
        return value

    def finish(self) -> None:
        if not self.any_line:
            if self.first_bad is not None:
                lineno, e = self.first_bad
                bad = self.bad + (self.pending is not None)
                raise InputError(
                    f"no line could be read: {bad} line(s), none valid JSON; line {lineno}: "
                    f"{json_error_reason(e)}",
                    where=f"{self.path}:{lineno}:{e.colno}",
                    hint="the file must hold one JSON value per line; check the log was written "
                    "whole, or force another format with --format",
                )
            raise InputError("file is empty", where=str(self.path), hint="nothing to ingest; check the export")
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


def iter_json_array(path: Path, ctx: ImportContext) -> Iterator[tuple[int, Any]]:
    """Yield the items of a top-level JSON array one at a time (a lone object as one item).

    The file text is read whole, but each item is decoded only when it is reached, so a
    large export never holds every conversation's object tree at once.
    """
    data = path.read_bytes()
    if not data.strip():
        raise InputError("file is empty", where=str(path), hint="nothing to ingest; check the export")
    text = decode(data, ctx)
    decoder = json.JSONDecoder()
    n = len(text)

    def skip_ws(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    def fail(msg: str, pos: int) -> InputError:
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        return InputError(
            f"malformed JSON: {msg}",
            where=f"{path}:{line}:{col}",
            hint="the file must be valid JSON; check the export was fully written, or force "
            "another format with --format",
        )

    i = skip_ws(0)
    if i < n and text[i] == "{":
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise fail(e.msg, e.pos) from None
        if skip_ws(end) != n:
            raise fail("extra data after the top-level object", skip_ws(end))
        yield 0, value
        return
    if i >= n or text[i] != "[":
        raise fail("expected a JSON list or object", i)
    i = skip_ws(i + 1)
    index = 0
    if i < n and text[i] == "]":
        return
    while True:
        try:
            value, i = decoder.raw_decode(text, i)
        except json.JSONDecodeError as e:
            raise fail(e.msg, e.pos) from None
        yield index, value
        index += 1
        i = skip_ws(i)
        if i < n and text[i] == ",":
            i = skip_ws(i + 1)
            continue
        if i < n and text[i] == "]":
            if skip_ws(i + 1) != n:
                raise fail("extra data after the top-level list", skip_ws(i + 1))
            return
        raise fail("expected ',' or ']' between list items", i)


def head_text(head: bytes) -> str:
    return head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()


def first_jsonl_record(head: bytes) -> dict[str, Any] | None:
    """The first JSON object in a JSONL head, or None (for sniffing)."""
    line = head_text(head).split("\n", 1)[0]
    try:
        value = json.loads(line)
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


def epoch_iso(value: Any) -> str | None:
    """An ISO-8601 UTC string from a unix timestamp (seconds), or None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return datetime.fromtimestamp(value, tz=timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        return None
