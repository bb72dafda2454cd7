"""Importers: one module (or package) per log format, found through a registry.

Each format module registers its ``Importer`` with ``base.register`` when it is imported;
``registry()`` imports every format of this package once (every module or sub-package whose
name does not start with ``_``, ``base`` aside), so a new format needs no list to join.
``detect(path)`` asks each importer's ``sniff`` in priority order; ``--format`` skips it
(``get``).

The rule when two importers could read a file: the more specific wins, and only one may. An
importer's ``priority`` places it in a band (lower is asked first): ctxf's own export
(``ctxf_jsonl``, its header line names it) 0-14, an agent's or harness's own log 15-29 (Claude Code, Codex, Cline,
OpenHands, Inspect, VCR cassettes, ...: records only that tool writes), a benchmark's files 30-59 (MT-Bench), a shared
schema 60-69 (ShareGPT, DialogStudio), a provider's request shape 70-79 (OpenAI Chat, Responses, Anthropic Messages:
what many agents' logs embed), a fallback 80-99 (``generic_json``, ``sqlite_table``: ``Importer.fallback``, which
claims only what no other importer does). A specific sniffer declines what a more specific
format owns (``_sniffing.foreign_document``, ``mostly``), so that every file ctxf reads has one
claimant (``claimants``); the corpus test walks every file and folder unit through every sniffer. An importer's
``parse`` yields ``Session`` records and reports warnings and skipped records through its ``ImportContext``.

Layout: ``base`` (the contract, the registry, the readers and value helpers every importer
shares); the formats (``claude_code/``, ``codex/``, ``cassette/``, ``inspect_log/``,
``llm_logs/``, ``swe_agent/`` as packages, the others one module each); and the modules
that formats share, which are no formats themselves: ``_sniffing`` (head parsing, foreign
documents), ``_documents`` (the provider logs' JSON/JSONL record layout),
``_openai_shapes`` (usage, content parts, tool calls), ``_agent_messages`` and
``_agent_calls`` (agent-harness chat messages and call records), ``_swebench`` (verdicts),
``_images`` (image placeholders) and ``_sqlite`` (read-only SQLite logs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from ..errors import CtxfError, InputError, UnknownFormatError
from ..plugins import import_modules
from ._json import MAX_DEPTH, NestingError, nesting_error
from .base import RECORD_ERRORS, ImportContext, Importer, load_plugins, read_head, register, registered

_loaded = False
_SNIFF_ERRORS = (OSError, *RECORD_ERRORS)  # what a sniff may raise: "not mine"


def _load_all() -> None:
    """Import every format module in this package so each registers itself."""
    global _loaded
    if _loaded:
        return
    _loaded = True
    import_modules(__name__, __path__)
    load_plugins()  # third-party importers (entry points ``ctxf.importers``), after the built-in ones


def registry() -> dict[str, Importer]:
    """All importers by name, in detection order."""
    _load_all()  # imports every format module once; each registers itself
    return registered()


def format_names() -> list[str]:
    """The format names, in detection order."""
    return list(registry())


def get(name: str) -> Importer:
    """The importer of format ``name``; an unknown name is an error listing the known ones."""
    formats = registry()
    if name not in formats:
        raise UnknownFormatError(
            f"unknown format {name!r}",
            hint="known formats: " + ", ".join(formats),
        )
    return formats[name]


def _accepting(path: Path, head: bytes | None) -> Iterator[Importer]:
    """The importers whose sniff accepts ``path``, in detection order (``head`` read when None)."""
    if head is None:
        head = read_head(path)
    is_dir = path.is_dir()
    for imp in registry().values():
        if is_dir and not imp.handles_directories:
            continue
        try:
            if imp.sniff(path, head):
                yield imp
        except _SNIFF_ERRORS:
            continue


def detect(path: Path, head: bytes | None = None) -> Importer | None:
    """The first importer whose sniff accepts ``path``, or None (the fallbacks are asked last).

    Raises ``OSError`` when the head of ``path`` cannot be read (no read permission). A sniff
    that raises, whatever it raises (a head nested too deep, a value of a type it did not
    expect), is a sniff that does not accept the file.
    """
    return next(_accepting(path, head), None)


def claimants(path: Path, head: bytes | None = None) -> list[Importer]:
    """Every importer that claims ``path`` by the detection rule, in detection order: those whose
    sniff accepts it, a fallback (``Importer.fallback``) only when no other does. One claimant
    on every file ctxf reads, none on a file it leaves alone: ``tests/test_sniff_corpus.py``
    checks it over the corpus; ``detect`` returns the first (the fallbacks come last)."""
    out = list(_accepting(path, head))
    return [imp for imp in out if not imp.fallback] or out


def nested_head(head: bytes) -> NestingError | None:
    """The nesting error of a file whose head holds JSON nested deeper than any log's, or None."""
    if head.count(b"[") + head.count(b"{") <= MAX_DEPTH:
        return None
    e = nesting_error(head)
    return e if e.pos else None


def unknown_format(path: Path, head: bytes | None = None) -> CtxfError:
    """The error for a file no importer's ``sniff`` accepts: an unknown format (a usage error),
    or an unreadable input when its head nests deeper than any log does, it is empty, or its
    JSON does not parse (named at its line and column)."""
    e = nested_head(head) if head is not None else None
    if e is None and head is not None:
        from ._sniffing import unreadable_document

        bad = unreadable_document(path, head)  # empty, or JSON broken at line:col
        if bad is not None:
            return bad
    if e is not None:
        return InputError(
            f"cannot read: its JSON is nested deeper than {MAX_DEPTH} levels (line {e.lineno}, column "
            f"{e.colno}), so it is no log of a known format",
            where=str(path),
            hint="the file is corrupt or not a log",
        )
    return UnknownFormatError(
        "cannot tell which log format this is",
        where=str(path),
        hint="force one with --format NAME; known formats: " + ", ".join(format_names()),
    )


__all__ = [
    "ImportContext",
    "Importer",
    "claimants",
    "detect",
    "format_names",
    "get",
    "nested_head",
    "read_head",
    "register",
    "registry",
    "unknown_format",
]
