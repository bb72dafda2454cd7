"""gitleaks' rule table (``store/gitleaks/gitleaks.toml``, MIT, vendored unchanged) as ctxf ``Rule``s.

Each gitleaks rule is data: an id, a Go RE2 regex, lower-case keywords (one must be in the
lower-cased text for the regex to run), an entropy floor for the secret, the group that is the
secret, allowlists (regexes and stopwords the secret, the match or the line must not meet). This
module reads the table with ``tomllib``, converts each regex to Python ``re`` (``re2_to_python``)
and builds one ``Rule`` per entry that ``store/redact.py``'s engine runs like its own; the secret
becomes ``[redacted:<gitleaks id>]``. Rules scoped to a file path (``path = ...``) are left out:
a log has no path per string. ``generic-api-key`` is left out too (``LEFT_OUT``: ctxf's own
assignment rules are its counterpart).

Where RE2 and Python differ, and what is done:

- ``(?i)`` / ``(?-i)`` / ``(?s)`` in the middle of a pattern set the flag for the rest of the
  enclosing group in RE2; Python allows flags only at the start. They become scoped groups
  ``(?i:...)`` closed at the end of the enclosing group (and around each ``|`` of it).
- POSIX classes (``[[:alnum:]]``) are spelt out; a literal ``[``, ``&``, ``~``, ``|`` inside a
  class is escaped (Python reads ``[[`` and doubled set operators as future set syntax).
- ``\\z`` (end of text) is ``\\Z``.
- RE2's ``\\w``, ``\\d``, ``\\s`` and ``\\b`` are ASCII: every pattern is compiled with ``re.ASCII``.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("gitleaks") / "gitleaks.toml"

_POSIX = {"alnum": "a-zA-Z0-9", "alpha": "a-zA-Z", "digit": "0-9", "lower": "a-z", "upper": "A-Z",
          "xdigit": "0-9A-Fa-f", "space": r" \t\n\r\f\v", "word": r"\w", "punct": r"!-/:-@\[-`{-~",
          "blank": r" \t", "cntrl": r"\x00-\x1f\x7f", "print": r" -~", "graph": r"!-~"}
_FLAGS = re.compile(r"\(\?(-?[imsU]+|[imsU]+-[imsU]+)\)")


def re2_to_python(pattern: str) -> str:
    """``pattern`` (Go RE2 syntax, as gitleaks writes it) in Python ``re`` syntax (see the module doc)."""
    out: list[str] = []
    # per open group: how many scoped flag groups were opened inside it (closed with it), and their flags
    stack: list[list[str]] = [[]]
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\":
            esc = pattern[i:i + 2]
            out.append(r"\Z" if esc == r"\z" else esc)
            i += 2
            continue
        if c == "[":
            j, cls = _char_class(pattern, i)
            out.append(cls)
            i = j
            continue
        if c == "(":
            m = _FLAGS.match(pattern, i)
            if m:  # a flag group for the rest of the enclosing group
                out.append(f"(?{m.group(1)}:")
                stack[-1].append(m.group(1))
                i = m.end()
                continue
            stack.append([])
            out.append(c)
            i += 1
            continue
        if c == ")":
            out.append(")" * len(stack.pop()))
            if not stack:
                raise re.error("unbalanced parenthesis", pattern, i)
            out.append(c)
            i += 1
            continue
        if c == "|" and stack[-1]:  # the flags hold in the next alternative too
            flags = stack[-1]
            out.append(")" * len(flags) + "|" + "".join(f"(?{f}:" for f in flags))
            i += 1
            continue
        out.append(c)
        i += 1
    if len(stack) != 1:
        raise re.error("missing ), unterminated subpattern", pattern, n)
    out.append(")" * len(stack[0]))
    return "".join(out)


def _char_class(p: str, i: int) -> tuple[int, str]:
    """The class starting at ``p[i] == "["``: (the index after it, its Python spelling)."""
    out = ["["]
    j = i + 1
    if j < len(p) and p[j] == "^":
        out.append("^")
        j += 1
    first = True
    while j < len(p):
        c = p[j]
        if c == "]" and not first:
            out.append("]")
            return j + 1, "".join(out)
        first = False
        if c == "\\":
            out.append(p[j:j + 2])
            j += 2
            continue
        if c == "[" and p.startswith("[:", j):
            end = p.find(":]", j + 2)
            name = p[j + 2:end] if end > 0 else ""
            neg = name.startswith("^")
            if name.lstrip("^") in _POSIX and not neg:
                out.append(_POSIX[name])
                j = end + 2
                continue
        if c == "]":  # a literal ] first in the class
            out.append(r"\]")
        elif c in "[&~|":
            out.append("\\" + c)
        else:
            out.append(c)
        j += 1
    raise re.error("unterminated character set", p, i)


# gitleaks' name-and-value rules start ``[\w.-]{0,50}?`` (the name's left part, for its report).
# It may match nothing, so without it a pattern finds the same secrets; with it, Python's engine
# tries up to 50 characters at every position of the text (a third of the table's time on the corpus).
_LEFT_CONTEXT = r"[\w.-]{0,50}?"


def compile_re2(pattern: str) -> re.Pattern[str]:
    return re.compile(re2_to_python(pattern).replace(_LEFT_CONTEXT, ""), re.ASCII)


def keyword_finder(keywords: tuple[str, ...]) -> re.Pattern[str]:
    """One regex (a trie, in a lookahead) that finds at every position the longest of ``keywords``
    starting there, overlapping occurrences too: one scan of the text instead of one per keyword
    (measured on the corpus's stored text: 1.9 s against 6.9 s for 230 ``in`` scans). The keywords
    that are prefixes of a found one are present too (``prefixes``)."""
    trie: dict[str, dict] = {}
    for w in keywords:
        d = trie
        for c in w:
            d = d.setdefault(c, {})
        d[""] = {}

    def emit(d: dict[str, dict]) -> str:
        alts = [re.escape(c) + emit(d[c]) for c in sorted(d) if c]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 and "" not in d else "(?:" + "|".join(alts) + ")"
        return body + ("?" if "" in d else "")

    return re.compile(f"(?=({emit(trie)}))")


def found(finder: re.Pattern[str], text: str) -> set[str]:
    """The keywords ``finder`` finds in ``text``."""
    return set(finder.findall(text))


def prefixes(keywords: tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    """Each keyword's keywords that are a prefix of it (itself included)."""
    return {k: tuple(p for p in keywords if k.startswith(p)) for k in keywords}


# ---------------------------------------------------------------- allowlists and the check


def entropy(s: str) -> float:
    """Shannon entropy in bits per character (gitleaks' and ctxf's rules' floor)."""
    n = len(s)
    if not n:
        return 0.0
    return -sum(c / n * math.log2(c / n) for c in Counter(s).values())


@dataclass(frozen=True)
class Allowlist:
    """What makes a finding no secret: any regex found in the target (``secret``, ``match`` or
    ``line``), or a stopword in the lower-cased secret."""

    regexes: tuple[re.Pattern[str], ...] = ()
    target: str = "secret"
    stopwords: tuple[str, ...] = ()

    def allows(self, secret: str, match: str, line: str) -> bool:
        if self.stopwords:
            low = secret.lower()
            if any(w in low for w in self.stopwords):
                return True
        if self.regexes:
            text = match if self.target == "match" else line if self.target == "line" else secret
            return any(r.search(text) for r in self.regexes)
        return False


@dataclass(frozen=True)
class GitleaksCheck:
    """A gitleaks rule's test of a finding: entropy above the floor (a generic rule's secret must
    also hold a digit, as gitleaks asks), no allowlist of the rule's or the table's own."""

    rule_id: str
    entropy: float
    allowlists: tuple[Allowlist, ...]

    def __call__(self, secret: str, match: str, line: str) -> bool:
        if self.entropy and (entropy(secret) <= self.entropy
                             or (self.rule_id.startswith("generic") and not any(c.isdigit() for c in secret))):
            return False
        return not any(a.allows(secret, match, line) for a in self.allowlists)


def _allowlist(d: dict[str, Any]) -> Allowlist | None:
    """One allowlist of the table; None for one that needs a file path (``condition = "AND"``
    with ``paths``: a log's string has none, so it never holds)."""
    if d.get("paths") and d.get("condition", "OR").upper() == "AND":
        return None
    regexes = tuple(compile_re2(r) for r in d.get("regexes", ()))
    stopwords = tuple(w.lower() for w in d.get("stopwords", ()))
    if not regexes and not stopwords:
        return None
    return Allowlist(regexes, d.get("regexTarget", "secret"), stopwords)


# ``generic-api-key`` (any ``key`` / ``token`` / ``secret`` / ``password`` / ``auth`` name next to a
# value of 3.5+ bits of entropy with a digit) is ctxf's own assignment rules' counterpart
# (``redact._assign``, which also turn down code, placeholders and identifiers): with it, the
# corpus's raw lines met 31 more findings, every one a Figma ``file_key`` (a document id).
LEFT_OUT = frozenset({"generic-api-key"})


@lru_cache(maxsize=1)
def load() -> tuple[dict[str, Any], ...]:
    """The table's rules as ``{id, regex (compiled), keywords, entropy, group, allowlists}``, those
    scoped to a file path left out."""
    with TABLE.open("rb") as f:
        doc = tomllib.load(f)
    glob = doc.get("allowlist") or {}
    shared = tuple(a for a in (_allowlist(glob),) if a is not None)
    out = []
    for r in doc["rules"]:
        if "regex" not in r or "path" in r or r["id"] in LEFT_OUT:
            continue
        own = tuple(a for a in map(_allowlist, r.get("allowlists", ())) if a is not None)
        out.append({"id": r["id"], "regex": compile_re2(r["regex"]),
                    "keywords": tuple(k.lower() for k in r.get("keywords", ())),
                    "entropy": float(r.get("entropy", 0.0)), "group": int(r.get("secretGroup", 0)),
                    "allowlists": own + shared})
    return tuple(out)
