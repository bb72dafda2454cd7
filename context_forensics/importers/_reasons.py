"""What a record's error says to a user, in the log's words.

An importer skips a record whose shape broke its conversion (``ImportContext.bad_record``) and
the ingest fails a file whose layout did; both say why with ``record_error_reason``: the field
and what it holds as the log spells it (null, text, a number, an object, a list) and what was
expected, never a Python class or type name (``TypeError``, ``NoneType``; issue 31).
"""

from __future__ import annotations

import json
import re
from typing import Any

from ._json import MAX_DEPTH, NestingError
from ._text import clip


def json_error_reason(e: json.JSONDecodeError) -> str:
    """The whole reason of a JSON error, with its column.

    ``e.msg`` leaves the position out, and some messages stop on it ("Invalid control
    character at"): printed alone they read as cut off.
    """
    return f"{e.msg}{'' if e.msg.endswith(' at') else ' at'} column {e.colno}"


def record_error_reason(error: BaseException) -> str:
    """What a record's error says to a user, in the log's words: which field, what it holds (a
    JSON kind: null, text, a number, an object, a list) and what was expected; never a Python
    class name (``NoneType``, ``TypeError``)."""
    if isinstance(error, NestingError):
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(error, RecursionError):
        return "nested too deeply to read"
    if isinstance(error, json.JSONDecodeError):
        return f"malformed embedded JSON ({json_error_reason(error)})"
    field_name = getattr(error, "field", None)
    if isinstance(field_name, str):  # records.FieldTypeError: a record's field of the wrong kind
        return f"{field_name} is {json_kind(getattr(error, 'value', None))}, not text"
    if isinstance(error, KeyError):
        key = error.args[0] if error.args else "?"
        return f"the field {_clip_repr(key)} is missing"
    if isinstance(error, IndexError):
        return "a list is shorter than its record needs"
    text = str(error)
    if "integer string conversion" in text:
        return "a number (or a numeric text) of more than 4,300 digits"
    for pattern, words in _PYTHON_WORDS:
        m = pattern.search(text)
        if m:
            return words.format(kind=_kind_name(m.group("t")) if "t" in pattern.groupindex else "a value",
                                attr=m.groupdict().get("a") or "")
    if isinstance(error, OverflowError):
        return "a number too large to read"
    # An importer's own words ("a message record must be an object with an id"), or Python's
    # with its type names put in the log's terms.
    return _without_python_names(text) or "a field holds a value of another kind than expected"


_KINDS = {"NoneType": "null", "dict": "an object", "list": "a list", "tuple": "a list", "str": "text",
          "int": "a number", "float": "a number", "bool": "a boolean", "bytes": "bytes", "set": "a set"}


def json_kind(value: Any) -> str:
    """A value's kind in the log's terms: null, text, a number, a boolean, an object, a list."""
    return _kind_name(type(value).__name__)


def _kind_name(name: str) -> str:
    return _KINDS.get(name, "a value")


_PYTHON_WORDS = [(re.compile(p), w) for p, w in [
    (r"'(?P<t>\w+)' object is not (?:subscriptable|iterable)", "{kind} where an object or a list belongs"),
    (r"'(?P<t>\w+)' object has no attribute '(?P<a>\w+)'", "{kind} where an object belongs"),
    (r"unhashable type: '(?P<t>\w+)'", "{kind} where text or a number belongs"),
    (r"can only concatenate str \(not \"(?P<t>\w+)\"\) to str", "{kind} where text belongs"),
    (r"expected string or bytes-like object, got '(?P<t>\w+)'", "{kind} where text belongs"),
    (r"expected string or bytes-like object", "a value that is not text where text belongs"),
    (r"expected str instance, (?P<t>\w+) found", "{kind} where text belongs"),
    (r"must be (?:str|a string)[^,]*, not '?(?P<t>\w+)'?", "{kind} where text belongs"),
    (r"must be (?:int|an integer|real number)[^,]*, not '?(?P<t>\w+)'?", "{kind} where a number belongs"),
    (r"not supported between instances of '(?P<t>\w+)' and", "{kind} where a number or text belongs"),
    (r"unsupported operand type\(s\) for .*: '(?P<t>\w+)'", "{kind} where a number belongs"),
    (r"invalid literal for int\(\)", "text where a whole number belongs"),
    (r"could not convert string to float", "text where a number belongs"),
    (r"^'?(?P<t>\w+)'? object cannot be interpreted as an integer", "{kind} where a whole number belongs"),
]]
_PY_NAMES = re.compile(r"'(?:" + "|".join(_KINDS) + r")'|\bNoneType\b|\b[A-Z]\w*(?:Error|Exception)\b")


def _without_python_names(text: str) -> str:
    text = _PY_NAMES.sub(lambda m: _KINDS.get(m.group().strip("'"), "a value"), text)
    return text if len(text) <= 200 else clip(text, 197, "...")


def _clip_repr(value: Any) -> str:
    r = repr(value)
    return (clip(r, 57, "...") or "of a long name") if len(r) > 60 else r
