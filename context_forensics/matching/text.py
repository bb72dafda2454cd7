"""What a message shows the model, as text to search (fact presence, pins).

``presence_text`` is the one text every matcher reads (the facts' verbatim lookup, chunking and
embedding, the lexical, polarity and statement checks, ``ctxf check``, the pins of the
constraint-keeping policies). It is the message's text read as words a person would read, not
as the bytes a harness stored, which token counts keep (``tokens/`` counts the stored text):

- **A tool result stored as JSON text** (Codex keeps a shell call's output as the JSON the model
  was sent, ``{"output": "...\\n...", "metadata": {"exit_code": 0}}``; Copilot CLI's web results
  ``{"type": "output_text", "text": {"value": ...}}``) is read decoded when its strings hold
  escapes of line breaks, tabs or characters (``decoded_result``): the escaped text glues the
  letter of ``\\n`` to the next line's first word (``nNEXT_PUBLIC_LMSTUDIO_URL``), so no line of
  it could be matched. A JSON document without such escapes (a JSON file an agent read, a small
  ``{"temperature": 35}``) reads the same either way and stays as it is.
- **A listing with line-number prefixes** (``grep -n`` / ``rg -n`` output, ``9:NEXT_PUBLIC_…``
  or ``src/app.ts:12:import …``, context lines ``src/app.ts-13-…``; SWE-agent's and Claude Code's
  numbered file views) is read without them (``unnumbered``): the prefix glues to the line's
  first word (``9:NEXT_PUBLIC_LMSTUDIO_URL`` is one word to the verbatim matcher, as
  ``configuration.md:7:NEXT_PUBLIC…`` is), so a fact quoted on such a line was never found.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from typing import Any

from ..records import KIND_CLEARED_TOOL_RESULT, MARKER_KINDS, Message


def presence_text(m: Message) -> str:
    """What a message shows the model, as text to search: its text and tool-call arguments
    (string values of JSON arguments, so an edit's content reads as text, not escaped JSON); a
    tool result stored as escaped JSON decoded, line-number prefixes of a listing left out
    (module docstring)."""
    if m.kind in MARKER_KINDS:
        return ""
    text = m.text or ""
    if m.role == "tool" or m.kind == KIND_CLEARED_TOOL_RESULT:
        text = decoded_result(text)
    parts = [unnumbered(text)] if text else []
    for call in m.tool_calls:
        args = call.arguments or ""
        try:
            value = json.loads(args) if args.lstrip().startswith(("{", "[")) else args
        except ValueError:
            value = args
        parts.extend(json_strings(value))
    return "\n".join(p for p in parts if p and not p.isspace())


def json_strings(value: Any) -> Iterable[str]:
    """Every string inside a decoded JSON value (dict values, list items), depth first, in order."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from json_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from json_strings(v)


# A JSON string escape that glues to the words around it once read as text: a line break, a tab,
# a carriage return or a \uXXXX character (an escaped quote or slash reads as what it is).
_GLUING_ESCAPE = re.compile(r"\\[ntru]")


def decoded_result(text: str) -> str:
    """A tool result stored as a JSON document whose strings hold gluing escapes (``\\n``,
    ``\\t``, ``\\uXXXX``), as text: each string value decoded on lines of its own, a number or a
    boolean after its key (``exit_code: 0``), in order; any other text unchanged."""
    body = text.strip()
    if not body or body[0] not in "{[" or body[-1] not in "}]" or not _GLUING_ESCAPE.search(body):
        return text
    try:
        value = json.loads(body)
    except ValueError:
        return text
    if not isinstance(value, (dict, list)):
        return text
    return "\n".join(_json_lines(value))


def _json_lines(value: Any, key: str | None = None) -> Iterator[str]:
    """A decoded JSON value as lines: a string as it reads (``unnumbered``), without its key (a
    key is the harness's label, ``output``, no word of the tool's), a number or a boolean as
    ``key: value`` (``exit_code: 0``), containers depth first."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _json_lines(v, str(k))
    elif isinstance(value, list):
        for v in value:
            yield from _json_lines(v, key)
    elif isinstance(value, str):
        if value:  # a listing is one string of the document (its lines numbered alone)
            yield unnumbered(value)
    elif value is not None:
        shown = json.dumps(value)
        yield shown if key is None else f"{key}: {shown}"


# A line-number prefix: ``path:12:`` (a match of grep -n / rg -n over files; the path names a file:
# it holds a dot or a slash), ``path-12-`` (a context line), or a bare ``12:`` / ``12-`` (one file's
# listing; ``38:5. Simplify`` is line 38 of a numbered list) that is no time of day or range (``10:30``,
# ``1-800`` are no prefixes).
# (The path is checked after the match: a bounded lazy run, so a long line costs no backtracking.)
_NUMBERED = re.compile(r"(?:(?P<path>[^\n:]{1,300}?)(?:(?P<m>:)(?P<n1>\d{1,7}):|-(?P<n2>\d{1,7})-)"
                       r"|(?P<n3>\d{1,7})(?:(?P<sep>:)(?!\d\d(?:[:\s]|$))|-(?!\d)))")
_PATHLIKE = re.compile(r"\A\S[^\n]*[./]")


def unnumbered(text: str) -> str:
    """``text`` without the line-number prefixes of its lines when it is a numbered listing: at
    least half of its non-blank lines carry one, at least one of them a match line (``:``; a
    listing of context lines only does not exist), and no two consecutive numbered lines of the
    same file carry the same number (a column of dates or times, ``2024-05-01`` / ``2026-``,
    repeats its first field; line numbers do not). Any other text unchanged."""
    if ":" not in text or not any(ch.isdigit() for ch in text[:200]):
        return text
    lines = text.split("\n")
    found: list[tuple[int, int]] = []  # (line index, end of its prefix)
    blank = 0
    match_line = False
    last: dict[str, int] = {}
    for i, line in enumerate(lines):
        if not line.strip():
            blank += 1
            continue
        hit = _NUMBERED.match(line)
        if hit is None:
            continue
        path = hit.group("path") or ""
        if path and not _PATHLIKE.match(path):
            continue
        n = int(hit.group("n1") or hit.group("n2") or hit.group("n3"))
        if last.get(path) == n:
            return text  # a repeated first field: a column of values, not line numbers
        last[path] = n
        match_line = match_line or bool(hit.group("m")) or hit.group("sep") == ":"
        found.append((i, hit.end()))
    if not match_line or 2 * len(found) < len(lines) - blank:
        return text
    for i, end in found:
        lines[i] = lines[i][end:]
    return "\n".join(lines)
