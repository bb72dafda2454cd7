"""What counts as an escape, checked for one input inside a worker process.

The input goes to every importer's ``sniff`` (as ``detect`` and the folder walk call them), then
to ``context_forensics.ingest`` on the worker's store: once as a user would (a folder walked
recursively, each file detected; a file with the format ``detect`` picks, known from the sniffs
already run) and, when that did not read it as the importer the input was made for, once more
with ``fmt=`` that importer. An escape is:

- an exception out of a ``sniff`` other than the ones its caller skips (``OSError`` and
  ``ValueError`` for a file, as ``importers.detect`` does; ``OSError`` for a folder);
- any exception out of ``ingest`` (it promises to report a bad file as a failed row);
- a failed row whose error is a catch-all rather than a ctxf error: one whose reason is a
  Python exception class (``unexpected content for format X: TypeError: ...``, ``KeyError:
  'id'``), or that names one anywhere, or a Python type (``... (TypeError: ToolCall.name must
  be a string, not NoneType)``): the error says the place and the field in the log's words,
  ``internal error``, ``store write failed: ...`` (an SQLite error from the log's values), or
  ``cannot read:`` with a codec's or decompressor's words (``UnicodeEncodeError`` from a lone
  surrogate, a bad gzip body);
- a file listed more than once by the folder walk (a symlink back up: ``loop -> ..``);
- a failed file that left anything in the store (a row of ``sessions`` or ``files`` for its
  path, or any table's row count moved when every file failed): ``partial write``;
- ``MemoryError`` anywhere (``out of memory``); a hang or a crash is seen by the engine.

For an escape inside a failed row the traceback is gone (ingest caught it), so the oracle parses
that file again with the importer alone (``importers.registry()[fmt].parse``) to find where the
exception was raised; the location is the innermost frame inside ``context_forensics``.
"""

from __future__ import annotations

import builtins
import os
import re
import sqlite3
import traceback
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import context_forensics as ctxf
from context_forensics import importers

EXCEPTION_NAMES = {n for n, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, BaseException)}
# A class name that *is* the message ("x.json: KeyError: 'id'"), not one quoted inside ctxf's
# own explanation ("... an unexpected type or value (TypeError: ...)").
_CLASS_AS_REASON = re.compile(r"(?:^|: )(zlib\.error|sqlite3\.\w+Error|yaml\.\w+Error|zipfile\.\w+|gzip\.BadGzipFile|"
                              r"binascii\.Error|lzma\.LZMAError|[A-Z]\w*(?:Error|Exception))(?=:|$| )")
LIBRARY_TEXTS = [("codec can't", "UnicodeError"), ("Not a gzipped file", "gzip.BadGzipFile"),
                 ("end-of-stream marker", "EOFError"), ("while decompressing", "zlib.error"),
                 ("CRC check failed", "gzip.BadGzipFile"), ("Bad CRC-32", "zipfile.BadZipFile"),
                 ("Invalid data stream", "OSError"), ("Compressed data ended", "lzma.LZMAError"),
                 ("Incorrect length of data produced", "OSError")]
_UNEXPECTED = re.compile(r"unexpected content for format \S+: ([\w.]+): ")
# Python's words in a failed file's error ("(TypeError: ToolCall.name must be a string, not
# NoneType)", "Exceeds the limit (4300 digits) for integer string conversion"): a message must say
# the place and the field in the log's words (issue 31).
_PYTHON_WORDS = re.compile(r"\bNoneType\b|\b[A-Z]\w*(?:Error|Exception)\b|for integer string conversion")
LAYOUT = "its layout has an unexpected type or shape"
_INTERNAL = re.compile(r"internal error\b.*?\b((?:\w+\.)*[A-Z]\w*(?:Error|Exception))\b")


@dataclass
class Escape:
    via: str  # "sniff:NAME", "ingest", "ingest --format NAME"
    type: str  # exception class, or "partial write", "hang", "crash"
    where: str  # innermost context_forensics frame (file:line function), or "?"
    message: str
    file: str = ""  # the failed file (inside a folder input), relative to the input
    traceback: str = ""

    def signature(self) -> tuple[str, str, str]:
        return (self.via.split(":")[0].split(" ")[0], self.type, self.where)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def innermost(tb: traceback.StackSummary | list[traceback.FrameSummary]) -> str:
    frames = [f for f in tb if f"{os.sep}context_forensics{os.sep}" in f.filename]
    if not frames:
        return "?"
    f = frames[-1]
    rel = f.filename.split(f"{os.sep}context_forensics{os.sep}", 1)[1]
    return f"{rel}:{f.lineno} {f.name}"


def _from_exception(via: str, e: BaseException, file: str = "") -> Escape:
    tb = traceback.extract_tb(e.__traceback__)
    text = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-12))
    return Escape(via, _type_name(e), innermost(tb), _clip(str(e)), file, text)


def _type_name(e: BaseException) -> str:
    t = type(e)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def _clip(s: str, n: int = 300) -> str:
    s = s.replace("\n", " | ")
    return s if len(s) <= n else s[: n - 3] + "..."


def classify(error: str) -> str | None:
    """The escape type a failed row's error names, or None for a ctxf error."""
    first = error.split("\n", 1)[0]
    if "out of memory" in first.lower():
        return "MemoryError"
    m = _UNEXPECTED.search(first)
    if m:
        return m.group(1)
    if "internal error" in first:
        m = _INTERNAL.search(first)
        return (m.group(1) if m and m.group(1) else "internal error")
    if "store write failed:" in first:
        return "sqlite3.Error (store write failed)"
    if "cannot read:" in first:
        # ingest turns any OSError / UnicodeError into "cannot read: <its text>": an OS error on
        # the file is a per-file failure, but a codec or decompressor's words mean a value of the
        # log broke the reader (ctxf's own "cannot read: ..." errors say something else)
        reason = first.split("cannot read:", 1)[1]
        for marker, kind in LIBRARY_TEXTS:
            if marker in reason:
                return kind + " (cannot read)"
    for name in _CLASS_AS_REASON.findall(first):
        if name in EXCEPTION_NAMES or "." in name:
            return name
    m = _PYTHON_WORDS.search(first)
    if m:
        return f"Python's words in the error ({m.group()})"
    return None


# ---------------------------------------------------------------- the store


def snapshot(db: Path) -> dict[str, int]:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {n: conn.execute(f'SELECT count(*) FROM "{n}"').fetchone()[0] for n in names}
    finally:
        conn.close()


def sources(db: Path) -> dict[str, int]:
    """Rows per path: sessions by ``source`` plus file records by ``path``."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        out: dict[str, int] = {}
        for sql in ("SELECT source, count(*) FROM sessions GROUP BY source",
                    "SELECT path, count(*) FROM files GROUP BY path"):
            for src, n in conn.execute(sql):
                out[src] = out.get(src, 0) + n
        return out
    finally:
        conn.close()


# ---------------------------------------------------------------- the checks


def regular_files(root: Path) -> tuple[list[Path], list[Path]]:
    """The regular files and the folders under ``root`` (links not followed: a loop stays a loop)."""
    if not root.is_dir():
        return ([root] if root.is_file() else []), []
    files, dirs = [], [root]
    for dirpath, dirnames, names in os.walk(root, followlinks=False):
        for d in dirnames:
            p = Path(dirpath) / d
            if not p.is_symlink():
                dirs.append(p)
        for n in names:
            p = Path(dirpath) / n
            if p.is_file() and not p.is_symlink():
                files.append(p)
    return files, dirs


def check_sniffs(path: Path) -> tuple[list[Escape], str | None]:
    """Every importer's sniff on every file and folder of the input; and, for a file, the
    format ``importers.detect`` would pick (the first sniff, in registry order, that accepts it)."""
    out: list[Escape] = []
    files, dirs = regular_files(path)
    reg = importers.registry()
    detected: str | None = None
    for f in files:
        head = importers.read_head(f)
        for imp in reg.values():
            try:
                if imp.sniff(f, head) and f == path and detected is None:
                    detected = imp.name
            except (OSError, ValueError):
                pass  # detect() skips these
            except BaseException as e:  # noqa: BLE001 - the point: whatever else leaves sniff
                out.append(_from_exception(f"sniff:{imp.name}", e, _rel(f, path)))
    for d in dirs:
        for imp in reg.values():
            if not imp.handles_directories:
                continue
            try:
                imp.sniff(d, b"")
            except OSError:
                pass  # the folder walk skips these
            except BaseException as e:  # noqa: BLE001
                out.append(_from_exception(f"sniff:{imp.name}", e, _rel(d, path)))
    return out, detected


def _rel(p: Path, root: Path) -> str:
    try:
        return str(p.relative_to(root.parent))
    except ValueError:
        return str(p)


def check_ingest(path: Path, target: str, ws: Any, db: Path,
                 detected: str | None) -> tuple[list[Escape], dict[str, Any]]:
    """Ingest as a user would, then forced to ``target`` if that is not what was read.

    A folder is ingested as it is (walked, each file detected). A file is ingested with
    ``fmt=`` the format ``check_sniffs`` found ``detect`` would pick, which is what ingest would
    do without it and saves running every sniff again; a file no sniff accepts goes straight to
    the forced run (without it, ingest reports it as of unknown format).
    """
    escapes: list[Escape] = []
    info: dict[str, Any] = {}
    if path.is_dir() or detected is not None:
        runs: list[tuple[str, str | None]] = [("ingest", None if path.is_dir() else detected)]
    else:
        runs = [(f"ingest --format {target}", target)]
    for via, fmt in runs:
        before, by_source = snapshot(db), sources(db)
        try:
            # forced: force=True, or a file the first run stored would be "unchanged", not parsed
            result = ctxf.ingest(path, fmt=fmt, recursive=True, force=via != "ingest", store=ws)
        except BaseException as e:  # noqa: BLE001 - ingest promises never to raise for a bad file
            escapes.append(_from_exception(via, e))
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            continue
        files = result.report.files
        info.setdefault("statuses", []).extend(f.status for f in files)
        formats = {f.format for f in files if f.status != "failed"}
        if via == "ingest" and target not in formats and path.exists():
            runs.append((f"ingest --format {target}", target))
        seen = Counter(os.path.realpath(f.path) for f in files if os.path.exists(f.path))
        twice = {p: n for p, n in seen.items() if n > 1}
        if twice:
            p, n = max(twice.items(), key=lambda kv: kv[1])
            escapes.append(Escape(via, "file listed twice (symlink loop)", "?",
                                  f"{len(twice)} file(s) reached by more than one path, "
                                  f"{_rel(Path(p), path)} {n} times"))
        failed = [f for f in files if f.status == "failed"]
        # A whole file failed for its layout (not an escape: what issue 31 wants down to files
        # with no readable record); counted per input, shown in the table.
        info["layout"] = info.get("layout", 0) + sum(LAYOUT in (f.error or "") for f in failed)
        by_source_after = sources(db) if failed else {}
        for f in failed:
            kind = classify(f.error or "")
            if kind is not None:
                escapes.append(_located(via, kind, f, path))
            src = str(Path(f.path).resolve()) if Path(f.path).exists() else f.path
            if by_source_after.get(src, 0) != by_source.get(src, 0):
                escapes.append(Escape(via, "partial write", "?", f"{f.path}: rows moved although it failed: "
                                      f"{_clip(f.error or '')}", _rel(Path(f.path), path)))
        if files and len(failed) == len(files):
            after = snapshot(db)
            if after != before:
                moved = {k: (before.get(k), v) for k, v in after.items() if before.get(k) != v}
                escapes.append(Escape(via, "partial write", "?", f"every file failed, yet the store moved: {moved}"))
    return escapes, info


def _located(via: str, kind: str, f: Any, root: Path) -> Escape:
    """An escape from a failed row, with the place it was raised (found by parsing again)."""
    where, tb_text = "?", ""
    if kind == "MemoryError" and "ran out of memory" in (f.error or ""):
        where = "caught: the file failed with ctxf's out-of-memory error"
    fmt = f.format
    p = Path(f.path)
    if fmt is None and p.exists() and kind != "MemoryError":  # it broke the format detection
        try:
            importers.detect(p)
        except BaseException as e:  # noqa: BLE001
            return Escape(via, kind, innermost(traceback.extract_tb(e.__traceback__)), _clip(f.error or ""),
                          _rel(p, root), "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-12)))
    if fmt and p.exists() and kind != "MemoryError":
        imp = importers.registry().get(fmt)
        if imp is not None:
            ctx = importers.ImportContext(path=p)
            try:
                for s in imp.parse(p, ctx):
                    list(s.messages)
                where = "store write"  # the importer alone read it: the write to the store raised
            except BaseException as e:  # noqa: BLE001
                tb = traceback.extract_tb(e.__traceback__)
                where = innermost(tb)
                tb_text = "".join(traceback.format_exception(type(e), e, e.__traceback__, limit=-12))
    return Escape(via, kind, where, _clip(f.error or ""), _rel(p, root), tb_text)


def check(path: Path, target: str, ws: Any, db: Path) -> tuple[list[Escape], dict[str, Any]]:
    escapes, detected = check_sniffs(path)
    more, info = check_ingest(path, target, ws, db, detected)
    return escapes + more, info
