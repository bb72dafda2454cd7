"""Fact sources: the facts to track, from ``--fact``, facts files and the config.

A facts file is a YAML list, a ``facts:`` mapping, or plain text with one fact per line
(``parse_facts_text``); ``gather_facts`` merges every source in order, deduplicated. A fact is
kept as written, whitespace-normalised (``clean_fact``); an empty one is an input error naming
where it came from.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable

from ...errors import InputError


def clean_fact(value: Any, where: str) -> str:
    """A fact as tracked: a non-empty string, whitespace-normalised (``where`` names its source)."""
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"a fact must be a non-empty string, got {value!r}", where=where)
    return " ".join(value.split())


def parse_facts_text(text: str, where: str = "<facts>") -> list[str]:
    """Facts from a facts file's text: a YAML list, a ``facts:`` mapping, or one fact per line.

    A file whose first meaningful line starts with ``- `` or ``facts:`` is read as YAML; any other
    is plain text, one fact per line (blank lines and ``#`` comments skipped), so a fact line
    with a colon in it is never mistaken for a YAML mapping.
    """
    import yaml

    from ...config.strict_yaml import load_strict

    lines = [ln.strip() for ln in text.splitlines()]
    meaningful = [ln for ln in lines if ln and not ln.startswith("#")]
    if not meaningful:
        return []
    head = meaningful[0]
    if head.startswith("- ") or head == "-" or head.startswith("facts:") or head.startswith("["):
        try:
            data = load_strict(text)
        except yaml.YAMLError as e:
            mark = getattr(e, "problem_mark", None)
            loc = f"{where}:{mark.line + 1}:{mark.column + 1}" if mark else where
            raise InputError(f"invalid YAML: {getattr(e, 'problem', None) or e}", where=loc) from None
        if isinstance(data, dict):
            unknown = sorted(set(data) - {"facts"})
            if unknown:
                raise InputError(f"unknown key(s) {unknown}", where=where, hint="a facts file holds `facts: [...]`")
            data = data.get("facts") or []
        if not isinstance(data, list):
            raise InputError("expected a list of facts", where=where)
        return [clean_fact(v, f"{where}: facts[{i}]") for i, v in enumerate(data)]
    return [" ".join(ln.split()) for ln in meaningful]


def load_facts_file(path: str | Path) -> list[str]:
    """The facts of a facts file (``parse_facts_text``); an unreadable file is an input error."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot read the facts file: {e}", where=str(p)) from None
    return parse_facts_text(text, str(p))


def gather_facts(given: Iterable[str] | None = None, files: Iterable[str | Path] | None = None,
                 config_facts: Iterable[str] | None = None) -> list[str]:
    """Facts from ``--fact``, then ``--facts-file``, then the config, deduplicated in order."""
    out: list[str] = []
    for f in given or []:
        out.append(clean_fact(f, "--fact"))
    for path in files or []:
        out.extend(load_facts_file(path))
    for f in config_facts or []:
        out.append(clean_fact(f, "config: facts"))
    return list(dict.fromkeys(out))
