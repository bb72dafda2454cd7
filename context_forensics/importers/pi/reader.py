"""Reading a Pi session file: its entries in file order, a torn line recovered.

A Pi session is JSONL written by appending one ``JSON.stringify(entry)`` plus a newline per
entry. A write that lost its newline leaves two entries run together on one line
(``{...}{...}``: the corpus's ``session.jsonl`` holds one). Pi itself skips such a line (its
loader drops what ``JSON.parse`` refuses), losing both entries; here the line is split on an
object boundary and each piece read through the bounded parser (``_json.parse_json``), with a
warning naming the line. The split is bounded: at most ``MAX_CANDIDATES`` boundaries are tried
per line and at most ``MAX_PIECES`` objects recovered, so a hostile line costs at most
``MAX_CANDIDATES`` + 2 parses of pieces of itself, never a search over every ``}{`` in it. A line no split explains is
what any JSONL reader does with it (``base.JsonlLines``: skipped and counted, a torn last line warned as such).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, Iterator

import orjson

from .._json import nested_too_deep, parse_json
from ..base import SKIP, ImportContext, JsonlLines

MAX_CANDIDATES = 64  # object boundaries tried on one line
MAX_PIECES = 16  # objects recovered from one line
_BOUNDARY = re.compile(rb"\}[ \t]*\{")


def split_torn(raw: bytes, ctx: ImportContext | None = None, line: int | None = None) -> list[Any] | None:
    """The JSON objects run together on ``raw`` (two or more, each a dict), or None.

    None when the line is one valid JSON value (nothing torn), when no split into objects that
    each parse explains it, or when it would take more than the bounds to find one.
    """
    data = raw.strip()
    if not (data.startswith(b"{") and data.endswith(b"}")) or _BOUNDARY.search(data) is None:
        return None
    try:
        parse_json(data, None)
        return None  # the whole line parses: not torn (orjson refused it for another reason)
    except json.JSONDecodeError:
        pass
    pieces: list[Any] = []
    start = 0
    tried = 0
    for m in _BOUNDARY.finditer(data):
        if m.start() < start:
            continue
        tried += 1
        if tried > MAX_CANDIDATES or len(pieces) >= MAX_PIECES - 1:
            return None
        try:
            value = parse_json(data[start:m.start() + 1], ctx, line=line)
        except json.JSONDecodeError:
            continue  # a "}{" inside a string, or a nested boundary: try the next one
        if not isinstance(value, dict):
            return None
        pieces.append(value)
        start = m.end() - 1
    if not pieces:
        return None
    try:
        last = parse_json(data[start:], ctx, line=line)
    except json.JSONDecodeError:
        return None
    if not isinstance(last, dict):
        return None
    pieces.append(last)
    return pieces


def iter_entries(path: Path, ctx: ImportContext) -> Iterator[tuple[int, Any]]:
    """``(line_number, value)`` for each JSON value of the file, in order; a torn line yields
    each of its objects under its own line number (warned). Other bad lines as ``JsonlLines``."""
    lines = JsonlLines(path, ctx)
    loads, error = orjson.loads, orjson.JSONDecodeError
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            try:
                value = loads(raw)
            except error:
                pieces = split_torn(raw, ctx, lineno)
                if pieces is not None:
                    if lines.pending is not None:
                        lines.skip_pending()
                    lines.any_line = True
                    ctx.warn(f"{len(pieces)} JSON objects run together on one line (a write that lost its "
                             "newline); read each of them", line=lineno)
                    ctx.skip("torn line recovered")
                    for piece in pieces:
                        yield lineno, piece
                    continue
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
            yield lineno, value
    lines.finish()
