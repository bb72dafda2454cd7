"""The checks a reading call makes before it reads: that its store exists, and that its filter
values (``sessions --format / --outcome / --agent``) are ones a session can have.

A reading command never creates a store: a missing file is a ``NotFoundError`` (exit 2) naming
the path and the ``ctxf ingest`` that makes it, and nothing is created. A SESSION argument that
is a log file on disk is ingested on the fly, which needs the store: then it is created, as
``ingest`` creates it. A filter value nothing can match is a usage error listing the allowed
values and the closest one, not an empty list.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any


def on_disk(*refs: object) -> bool:
    """Whether one of the session references is a file or folder path (ingested on the fly)."""
    for ref in refs:
        if ref is None:
            continue
        try:
            if Path(str(ref)).exists():
                return True
        except (OSError, ValueError):  # a name too long for a path, a NUL: an id, not a file
            continue
    return False


def require_store(path: str | Path, *, given: bool, why: str | None = None) -> None:
    """Raise ``NotFoundError`` when there is no store file at ``path`` (``":memory:"`` always is).
    ``given``: the path came from ``--db`` / ``db=`` (the fix names it); else ``why`` says where
    it came from (``config.location``: ``$CTXF_DB``, the config, the user data folder)."""
    from ..errors import NotFoundError

    if str(path) == ":memory:" or Path(path).exists():
        return
    db = f" --db {path}" if given else ""
    because = f" ({why})" if why and not given else ""
    raise NotFoundError(f"no store at {path}{because}: ingest logs first with `ctxf ingest LOGS{db}`")


def _choice(what: str, value: str, allowed: Iterable[str], *, key: Any = None) -> str:
    """``value`` when it is one of ``allowed`` (compared through ``key``), else a ``UsageError``
    naming the allowed values and the closest one."""
    from ..errors import UsageError

    names = sorted(set(allowed))
    norm = key or (lambda s: s)
    for n in names:
        if norm(n) == norm(value):
            return n
    close = difflib.get_close_matches(norm(value), [norm(n) for n in names], n=1, cutoff=0.5)
    near = next((n for n in names if close and norm(n) == close[0]), None)
    did = f"did you mean {near!r}? " if near else ""
    raise UsageError(f"unknown {what} {value!r}: {did}allowed: {', '.join(names)}")


def check_filters(rows: Sequence[Mapping[str, Any]], *, fmt: str | None, outcome: str | None,
                  agent: str | None) -> None:
    """Raise ``UsageError`` (exit 2) for a ``--format``, ``--outcome`` or ``--agent`` no session
    can have. ``rows``: the stored sessions (a format or agent found in them is allowed too: a
    store keeps the names of the ctxf that wrote it, an importer may name any agent)."""
    from ..importers import format_names
    from ..records import OUTCOMES
    from ..store.agents import FORMAT_AGENTS, agent_of, normal

    if outcome is not None:
        _choice("outcome", outcome, OUTCOMES)
    if fmt is not None:
        _choice("format", fmt, [*format_names(), *(r["format"] for r in rows if r["format"])])
    if agent is not None:
        # The agents importers name themselves besides the formats' ones (Cline's forks).
        named = [a for a in (agent_of(r["format"], r["metadata"]) for r in rows) if a]
        _choice("agent", agent, [*FORMAT_AGENTS.values(), "roo", "kilo", *named], key=normal)


__all__ = ["on_disk", "require_store", "check_filters"]
