"""JSON arrays read in pieces: ``iter_json_array`` (the exports, tau-bench, pydantic-ai, Cline, OpenHands trajectories)
on a
``TextStream``, so a big file's text is never held whole."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..errors import InputError
from ._json import IntGuard, NestingError, nesting_error, scrub
from .base import NESTING_HINT, SKIP, ImportContext


class TextStream:
    """A JSON file's text read in pieces (``CHUNK`` bytes, UTF-8, a BOM dropped): ``buf`` holds the
    text from the item being read on, so memory follows the largest item, not the file. Invalid
    UTF-8 becomes U+FFFD with one warning naming the byte, as ``decode`` does for a whole file.
    Positions are indices into ``buf``; ``where`` turns one into the file's line and column."""

    CHUNK = 1 << 20

    def __init__(self, path: Path, ctx: Any) -> None:
        self.path, self.ctx = path, ctx
        self.f = path.open("rb")
        self.codec = codecs.getincrementaldecoder("utf-8")("strict")
        self.buf, self.eof, self.bytes_read, self.first = "", False, 0, True
        self.lines, self.col = 0, 0  # newlines and the column carried by the text dropped from buf

    def close(self) -> None:
        self.f.close()

    def more(self, at_least: int = 0) -> bool:
        """Read the next piece (at least ``at_least`` bytes) onto ``buf``; False at the end of the file."""
        if self.eof:
            return False
        data = self.f.read(max(self.CHUNK, at_least, 3 if self.first else 0))  # a BOM in one piece
        final = not data
        if self.first and data.startswith(b"\xef\xbb\xbf"):
            data = data[3:]
            self.bytes_read += 3
        self.first = False
        state = self.codec.getstate()
        try:
            text = self.codec.decode(data, final=final)
        except UnicodeDecodeError as e:
            self.ctx.warn(f"invalid UTF-8 at byte {self.bytes_read + e.start - len(state[0])}; replaced with U+FFFD")
            self.codec = codecs.getincrementaldecoder("utf-8")("replace")
            self.codec.setstate(state)
            text = self.codec.decode(data, final=final)
        self.bytes_read += len(data)
        self.buf += text
        self.eof = final
        return not final or bool(text)

    def char(self, i: int) -> str:
        """The character at ``i`` ("" past the end of the file)."""
        while i >= len(self.buf):
            if not self.more():
                return ""
        return self.buf[i]

    def skip_ws(self, i: int) -> int:
        while self.char(i) in (" ", "\t", "\r", "\n"):
            i += 1
        return i

    def drop(self, i: int) -> int:
        """Forget the text before ``i`` (read past); the same place in the new ``buf``."""
        if i < self.CHUNK:
            return i
        gone = self.buf[:i]
        nl = gone.count("\n")
        self.col = len(gone) - gone.rfind("\n") - 1 if nl else self.col + len(gone)
        self.lines += nl
        self.buf = self.buf[i:]
        return 0

    def where(self, pos: int) -> str:
        nl = self.buf.rfind("\n", 0, pos)
        line = self.lines + self.buf.count("\n", 0, pos) + 1
        col = pos - nl if nl >= 0 else self.col + pos + 1
        return f"{self.path}:{line}:{col}"


_AFTER_VALUE = frozenset(" \t\r\n,]}")


def iter_json_array(path: Path, ctx: ImportContext) -> Iterator[tuple[int, Any]]:
    """Yield the items of a top-level JSON array one at a time (a lone object as one item).

    The file is read in pieces (``TextStream``) and each item decoded when it is complete, so a
    large export never holds the whole file's text, nor every conversation's object tree, at
    once. Each item goes through the guard of ``_json``: one nested past ``MAX_DEPTH`` is skipped
    and counted, with a warning naming its index (one too deep to decode at all ends the file
    there: an error).
    """
    src = TextStream(path, ctx)
    try:
        yield from _json_items(src, ctx)
    finally:
        src.close()


def _json_items(src: TextStream, ctx: ImportContext) -> Iterator[tuple[int, Any]]:
    path = src.path
    ints = IntGuard()  # an integer of thousands of digits reads as null, not a ValueError for the file
    decoder = json.JSONDecoder(parse_int=ints)

    def fail(msg: str, pos: int) -> InputError:
        return InputError(
            f"malformed JSON: {msg}",
            where=src.where(pos),
            hint="the file must be valid JSON; check the export was fully written, or force "
            "another format with --format",
        )

    def item(i: int) -> tuple[Any, int]:
        # decoded once the text holds all of it: a value not followed by what may follow one (a
        # number cut in two: "6.02" of "6.02e+23"), or that fails to decode before the end of the
        # file, is read on
        while True:
            try:
                value, end = decoder.raw_decode(src.buf, i)
                if src.eof or (end < len(src.buf) and src.buf[end] in _AFTER_VALUE):
                    return value, end
            except json.JSONDecodeError as e:
                if src.eof:
                    raise fail(e.msg, e.pos) from None
            except RecursionError:  # the file's line and column, not the buffer's
                deep = nesting_error(src.buf[i:])
                raise InputError(f"cannot read: JSON {deep.msg}", where=src.where(i + deep.pos),
                                 hint=NESTING_HINT) from None
            src.more(len(src.buf) - i)  # at least as much again: a long item is re-read log(n) times

    def guarded(value: Any, index: int) -> Any:
        ints.warn(ctx)
        try:
            value, fixed = scrub(value)
        except NestingError as e:
            ctx.bad_record(e, what="item", index=index)
            return SKIP
        if fixed:
            ctx.warn(f"item {index}: {fixed} string(s) held a lone UTF-16 surrogate escape; replaced it with U+FFFD")
        return value

    i = src.skip_ws(0)
    if src.char(i) == "" and not src.buf.strip():
        raise InputError("empty file", where=str(path), hint="nothing to ingest; check the export")
    if src.char(i) == "{":
        value, end = item(i)
        if src.char(src.skip_ws(end)) != "":
            raise fail("extra data after the top-level object", src.skip_ws(end))
        value = guarded(value, 0)
        if value is not SKIP:
            yield 0, value
        return
    if src.char(i) != "[":
        raise fail("expected a JSON list or object", i)
    i = src.skip_ws(i + 1)
    index = 0
    if src.char(i) == "]":
        return
    while True:
        value, i = item(i)
        value = guarded(value, index)
        if value is not SKIP:
            yield index, value
        del value
        index += 1
        i = src.drop(src.skip_ws(i))
        c = src.char(i)
        if c == ",":
            i = src.skip_ws(i + 1)
            continue
        if c == "]":
            if src.char(src.skip_ws(i + 1)) != "":
                raise fail("extra data after the top-level list", src.skip_ws(i + 1))
            return
        raise fail("expected ',' or ']' between list items", i)
