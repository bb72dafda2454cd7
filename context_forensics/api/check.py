"""``ctxf check``: cross-check what each session's log records against what ctxf reconstructs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .checks import on_disk
from .workspace import ConfigLike, Workspace, session_json, using


@dataclass
class CheckResult:
    """``ctxf check --json``: per session, the checks run and every inconsistency they found
    (``analysis/check``), and the totals."""

    sessions: list[Any]  # analysis.check.SessionCheck

    @property
    def consistent(self) -> bool:
        return all(s.consistent for s in self.sessions)

    @property
    def exit_code(self) -> int:
        """3 when a session is inconsistent (``ctxf check --fail``), else 0."""
        return 0 if self.consistent else 3

    def to_dict(self) -> dict[str, Any]:
        from ..analysis.check import CHECK_VERSION

        by: dict[str, int] = {}
        for s in self.sessions:
            for k, n in s.by_check().items():
                by[k] = by.get(k, 0) + n
        rows = []
        for s in self.sessions:
            d = s.to_dict()
            d["session"] = session_json(d["session"])
            rows.append(d)
        return {"version": CHECK_VERSION, "consistent": self.consistent,
                "totals": {"sessions": len(self.sessions), "inconsistent": sum(not s.consistent for s in self.sessions),
                           "inconsistencies": sum(by.values()), "by_check": dict(sorted(by.items()))},
                "sessions": rows}


def check(sessions: str | Path | Iterable[str | Path] | None = None, *, only: str | Iterable[str] | None = None,
          facts: str | Iterable[str] | None = None, fmt: str | None = None, store: Workspace | None = None,
          db: str | Path | None = None, config: ConfigLike = None, progress: Any = None) -> CheckResult:
    """Cross-check sessions (``ctxf check``): each reference (an id, a unique prefix, or a log
    path, ingested on the fly), else every session of the store. ``only`` runs the named checks
    (``analysis.check.CHECKS``); ``facts`` adds the facts check for those facts (loads the
    embedding model). An unknown check name raises ``UsageError`` listing the known ones.
    """
    from ..analysis.check import CHECKS, check_session
    from ..errors import UsageError

    refs = None if sessions is None else [sessions] if isinstance(sessions, (str, Path)) else list(sessions)
    names = None if only is None else [only] if isinstance(only, str) else list(only)
    if names is not None:
        unknown = [n for n in names if n not in CHECKS]
        if unknown:
            raise UsageError(f"unknown check(s): {', '.join(unknown)}", hint="known checks: " + ", ".join(CHECKS))
    wanted = None if facts is None else [facts] if isinstance(facts, str) else list(facts)
    with using(store, db, config, create=on_disk(*(refs or ()))) as ws:
        ids = [ws.resolve(str(r), fmt) for r in refs] if refs else [s["id"] for s in ws.store.sessions()]
        ids = list(dict.fromkeys(ids))
        embedder = None
        if wanted:
            from ..embed.embedders import embedder_for

            embedder = embedder_for(ws.cfg)
        out = []
        for k, sid in enumerate(ids, start=1):
            out.append(check_session(ws.store, sid, config=ws.cfg, only=names, facts=wanted, embedder=embedder))
            if progress is not None:
                progress(k, len(ids))
    return CheckResult(out)
