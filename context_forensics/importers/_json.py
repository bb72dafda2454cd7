"""The one guard every importer's JSON goes through: bounded nesting and no lone surrogates.

A log is read into Python values that the rest of ctxf walks recursively (hashing, JSON text
for the store, the importers' own helpers), and Python's recursion stops near 1,000 frames.
So every value read from a log is bounded here: nothing nested deeper than ``MAX_DEPTH``
levels gets past a reader (no real log comes near it: the deepest file of the corpus nests
13 levels; orjson, which writes the store's JSON, stops at 254). A value that does is a
``NestingError`` (a ``json.JSONDecodeError``, so every reader's handling of malformed JSON
applies: a JSONL line is skipped and counted, a document fails with its line and column).

JSON can also spell a lone UTF-16 surrogate (``"\\ud800"``), which Python decodes to a string
that no UTF-8 encoder (SQLite's among them) takes. orjson refuses such text; the standard
parser that reads what orjson refuses accepts it, so its values are scrubbed here: each lone
surrogate becomes U+FFFD, with a warning. Invalid UTF-8 is replaced the same way (``decode``).
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

import orjson

MAX_DEPTH = 200  # levels of nested lists / objects a log value may have
_INT_DIGITS = 4_300  # Python's default limit on converting digits to an int

_SURROGATE = re.compile("[\ud800-\udfff]")
# Strings and brackets, for finding where a text first nests too deep (errors only). Possessive
# (``*+``): the engine keeps no backtracking state for each escape of a string (a fuzzed line with a
# 5-million-character string of escapes and 27,000 levels of nesting took 380 MB to find the place).
_BRACKETS = re.compile(r'"[^"\\]*+(?:\\.[^"\\]*+)*+"|[\[\]{}]')


class Warns(Protocol):
    def warn(self, message: str, *, line: int | None = None) -> None: ...


class NestingError(json.JSONDecodeError):
    """JSON nested deeper than ``MAX_DEPTH`` levels (at ``pos`` of ``doc``)."""


def nesting_error(data: bytes | str) -> NestingError:
    """The error for ``data``, at the place where it first nests past ``MAX_DEPTH``."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, (bytes, bytearray)) else data
    depth, pos = 0, 0
    for m in _BRACKETS.finditer(text):
        tok = m.group()
        if tok in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                pos = m.start()
                break
        elif tok in "]}":
            depth -= 1
    return NestingError(f"nested deeper than {MAX_DEPTH} levels", text, pos)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` holds lists / dicts nested deeper than ``limit`` (walked without recursion)."""
    if type(value) is not dict and type(value) is not list:
        return False
    todo = [(value, 1)]
    pop, push = todo.pop, todo.append
    while todo:
        x, d = pop()
        if d > limit:
            return True
        for y in (x.values() if type(x) is dict else x):
            t = type(y)
            if t is dict or t is list:
                push((y, d + 1))
    return False


def nested_too_deep(raw: bytes | str, value: Any) -> bool:
    """``too_deep(value)`` for a value parsed from ``raw``, cheap for the usual record: a text
    with at most ``MAX_DEPTH`` brackets cannot nest deeper, so only the others are walked."""
    if len(raw) <= 2 * MAX_DEPTH:
        return False
    if isinstance(raw, str):
        n = raw.count("[") + raw.count("{")
    else:
        n = raw.count(b"[") + raw.count(b"{")
    if n <= MAX_DEPTH:
        return False
    t = type(value)
    return (t is dict or t is list) and too_deep(value)


def scrub(value: Any) -> tuple[Any, int]:
    """``value`` with each lone surrogate replaced by U+FFFD, and how many strings held one.

    Containers are fixed in place. Raises ``NestingError`` (at position 0) past ``MAX_DEPTH``.
    """
    t = type(value)
    if t is str:
        return (_SURROGATE.sub("\ufffd", value), 1) if _SURROGATE.search(value) else (value, 0)
    if t is not dict and t is not list:
        return value, 0
    fixed = 0
    todo: list[tuple[Any, int]] = [(value, 1)]
    while todo:
        x, d = todo.pop()
        if d > MAX_DEPTH:
            raise NestingError(f"nested deeper than {MAX_DEPTH} levels", "", 0)
        if type(x) is dict:
            bad_keys = []
            for k, y in x.items():
                ty = type(y)
                if ty is str:
                    if not y.isascii() and _SURROGATE.search(y):
                        x[k] = _SURROGATE.sub("\ufffd", y)
                        fixed += 1
                elif ty is dict or ty is list:
                    todo.append((y, d + 1))
                if type(k) is str and not k.isascii() and _SURROGATE.search(k):
                    bad_keys.append(k)
            for k in bad_keys:
                x[_SURROGATE.sub("\ufffd", k)] = x.pop(k)
                fixed += 1
        else:
            for i, y in enumerate(x):
                ty = type(y)
                if ty is str:
                    if not y.isascii() and _SURROGATE.search(y):
                        x[i] = _SURROGATE.sub("\ufffd", y)
                        fixed += 1
                elif ty is dict or ty is list:
                    todo.append((y, d + 1))
    return value, fixed


def has_surrogates(text: str) -> bool:
    return not text.isascii() and _SURROGATE.search(text) is not None


def replace_surrogates(text: str) -> str:
    return _SURROGATE.sub("\ufffd", text)


def decode(data: bytes, ctx: Warns | None, *, line: int | None = None) -> str:
    """UTF-8 decode; invalid bytes become U+FFFD and a warning, never an exception."""
    try:
        return data.decode("utf-8-sig" if data.startswith(b"\xef\xbb\xbf") else "utf-8")
    except UnicodeDecodeError as e:
        if ctx is not None:
            ctx.warn(f"invalid UTF-8 at byte {e.start}; replaced with U+FFFD", line=line)
        return data.decode("utf-8", errors="replace")


def parse_json(data: bytes | str, ctx: Warns | None = None, *, line: int | None = None) -> Any:
    """``json.loads`` with the guard: orjson first; what it refuses (invalid UTF-8, lone
    surrogates, NaN, integers beyond 64 bits) through the standard parser, scrubbed.

    Raises ``json.JSONDecodeError`` for malformed JSON and ``NestingError`` (one of them) for
    JSON nested deeper than ``MAX_DEPTH``. Replacements are warned about through ``ctx``.
    """
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if str(e).startswith("depth limit"):  # orjson's own limit (1,024): no need to read on
            raise nesting_error(data) from None
        return _parse_slow(data, ctx, line)
    if nested_too_deep(data, value):
        raise nesting_error(data)
    return value


class IntGuard:
    """``parse_int`` for the standard parser: an integer of more digits than Python converts
    (4,300: a ValueError that would fail the whole file) reads as null, counted in ``huge``."""

    def __init__(self) -> None:
        self.huge = 0

    def __call__(self, digits: str) -> int | None:
        if len(digits) > _INT_DIGITS:
            self.huge += 1
            return None
        return int(digits)

    def warn(self, ctx: Warns | None, *, line: int | None = None) -> None:
        if self.huge and ctx is not None:
            ctx.warn(f"{self.huge} integer(s) of more than {_INT_DIGITS:,} digits read as null", line=line)
            self.huge = 0


def _parse_slow(data: bytes | str, ctx: Warns | None, line: int | None) -> Any:
    text = decode(bytes(data), ctx, line=line) if isinstance(data, (bytes, bytearray, memoryview)) else data
    guard = IntGuard()
    try:
        value = json.loads(text, parse_int=guard)
    except RecursionError:
        raise nesting_error(text) from None
    guard.warn(ctx, line=line)
    try:
        value, fixed = scrub(value)
    except NestingError:
        raise nesting_error(text) from None
    if fixed and ctx is not None:
        ctx.warn(f"{fixed} string(s) held a lone UTF-16 surrogate escape (\\ud800-\\udfff); "
                 "replaced it with U+FFFD", line=line)
    return value


def bounded(value: Any, ctx: Warns | None = None, *, line: int | None = None, where: str = "") -> Any:
    """A value from another parser (YAML, a decoded payload) under the same guard: scrubbed of
    lone surrogates (warned about), ``NestingError`` past ``MAX_DEPTH``."""
    value, fixed = scrub(value)
    if fixed and ctx is not None:
        ctx.warn(f"{where}{fixed} string(s) held a lone UTF-16 surrogate; replaced it with U+FFFD", line=line)
    return value


__all__ = [
    "MAX_DEPTH",
    "NestingError",
    "bounded",
    "decode",
    "has_surrogates",
    "nested_too_deep",
    "nesting_error",
    "parse_json",
    "replace_surrogates",
    "scrub",
    "too_deep",
]
