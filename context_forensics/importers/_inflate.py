"""Bounded decompression: every gzip, zlib/deflate body and zip member an importer inflates.

A few kilobytes of deflate can stand for a gigabyte (a "decompression bomb"): inflated whole, a
1.5 MB cassette took 3.2 GB of memory. So every decompression goes through here, with two
bounds, each said in the error it raises:

- per stream (one body, one zip member): at most ``RATIO`` bytes out per byte in (with a
  ``FLOOR``: a short body may inflate further) and never more than ``MAX_STREAM``;
- per file: what all its streams inflate to together, at most ``FILE_RATIO`` times the file's
  size (never less than ``MAX_STREAM``): many small bombs in one file add up.

Real logs are far inside both (the corpus's gzip bodies inflate 2.4-2.7 times, its ``.eval``
members at most 7.1 times). Within them, a 10 MB cassette of 185 bodies of 1,000 KiB each
(185 MiB inflated, just under its file's bound) peaked at 256 MB resident in ``ctxf ingest``.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from ..errors import InputError

if TYPE_CHECKING:
    from .base import ImportContext

RATIO = 100  # bytes one stream may inflate to per compressed byte
FLOOR = 1 << 20  # ... but a stream may always inflate to 1 MiB
MAX_STREAM = 64 << 20  # and never past 64 MiB
FILE_RATIO = 20  # all the streams of one file: at most 20 times its size (MAX_STREAM at least)

CHUNK = 1 << 20


class InflateError(InputError):
    """A file's compressed parts together inflate past its bound: the file fails."""


class StreamTooBig(InflateError):
    """One stream (a body, a zip member) inflates past its bound: that record is skipped."""


def stream_limit(compressed: int) -> int:
    """The most one stream of ``compressed`` bytes may inflate to."""
    return min(MAX_STREAM, max(FLOOR, RATIO * compressed))


def limits_text() -> str:
    return (f"ctxf inflates one body or zip member to at most {RATIO} times its compressed size "
            f"(1 MiB at least, {MAX_STREAM >> 20} MiB at most), and a whole file's to {FILE_RATIO} times the "
            "file's size")


def _mib(n: int) -> str:
    return f"{n / (1 << 20):,.1f} MiB"


def charge(ctx: ImportContext | None, n: int, what: str) -> None:
    """Count ``n`` inflated bytes against the file's budget (``ctx``); raise ``InflateError``
    when the file's streams together pass it."""
    if ctx is None:
        return
    ctx.inflated += n
    budget = file_budget(ctx)
    if ctx.inflated > budget:
        raise InflateError(
            f"{what}: its compressed parts inflate to more than {_mib(budget)} in all ({FILE_RATIO} times the "
            "file's size): a decompression bomb?", where=str(ctx.path), hint=limits_text())


def file_budget(ctx: ImportContext) -> int:
    try:
        size = ctx.path.stat().st_size if ctx.path.is_file() else 0
    except OSError:
        size = 0
    return max(MAX_STREAM, FILE_RATIO * size)


def inflate(data: bytes, wbits: int, *, what: str, ctx: ImportContext | None = None,
            limit: int | None = None) -> bytes:
    """``data`` inflated (``wbits`` as ``zlib.decompressobj``: 31 gzip, 15 zlib, -15 raw deflate;
    concatenated gzip members are all read), at most ``limit`` bytes (``stream_limit`` of its
    size by default), counted against ``ctx``'s file. Raises ``InflateError`` past the limit and
    ``zlib.error`` for a stream that does not inflate."""
    cap = stream_limit(len(data)) if limit is None else limit
    out = bytearray()
    rest = data
    while True:
        d = zlib.decompressobj(wbits)
        chunk = rest
        while chunk:
            out += d.decompress(chunk, cap + 1 - len(out))
            if len(out) > cap:
                raise too_big(what, cap, len(data), ctx)
            chunk = d.unconsumed_tail
        out += d.flush()
        if len(out) > cap:
            raise too_big(what, cap, len(data), ctx)
        rest = d.unused_data
        if wbits != 31 or rest[:2] != b"\x1f\x8b":  # concatenated gzip members
            break
    charge(ctx, len(out), what)
    return bytes(out)


def too_big(what: str, cap: int, compressed: int, ctx: ImportContext | None) -> StreamTooBig:
    return StreamTooBig(f"{what}: inflates to more than {_mib(cap)} from {compressed:,} compressed bytes "
                        "(a decompression bomb?)", where=str(ctx.path) if ctx is not None else None,
                        hint=limits_text())
