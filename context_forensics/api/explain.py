"""``ctxf explain``: did context cause a failed run, at which step, and what would have saved it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import on_disk
from .workspace import ConfigLike, Workspace, session_json, using


@dataclass
class ExplainResult:
    """``ctxf explain --json``: the verdict, its ranked reasons with their evidence, the decisive
    step, the window and constraints there, the drift, a good run's divergence and the
    counterfactual replays (``analysis/explain``)."""

    report: Any  # analysis.explain.engine.ExplainReport
    model_notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        return str(self.report.verdict)

    def to_dict(self) -> dict[str, Any]:
        data = self.report.to_dict()
        data["session"] = session_json(data["session"])
        data["model_notes"] = self.model_notes
        return data


def explain(session: str | Path, *, model: str | None = None, facts: str | Iterable[str] | None = None,
            goal: str | None = None, against: str | Path | None = None, at: int | None = None,
            fmt: str | None = None, store: Workspace | None = None, db: str | Path | None = None,
            config: ConfigLike = None, progress: Any = None) -> ExplainResult:
    """Diagnose one session (``ctxf explain``): ``contributed``, ``not_limiting`` or ``unknown``.

    ``model`` replays under that model and its policy (a what-if; default: the log's own model
    and record); ``facts`` are the constraints to track (default: the config's ``facts:``, else
    the ``facts suggest`` sentences, marked suggested); ``goal`` the drift goal; ``against`` a
    good run to diverge from (default: a success of the same task in the store); ``at`` the
    decisive step (default: the first action that broke a constraint, the last edit before a
    failing check, or the final submission). Loads the embedding model (offline).
    """
    from ..analysis.explain.engine import explain_session
    from ..analysis.replay import model_notes_for
    from ..errors import UsageError

    given = None if facts is None else [facts] if isinstance(facts, str) else list(facts)
    with using(store, db, config, model, create=on_disk(session, against)) as ws:
        sid, _ = ws.session(str(session), fmt)
        good = ws.resolve(str(against), fmt) if against is not None else None
        if good == sid:
            raise UsageError("--against names the session itself", hint="give a good run of the same task")
        report = explain_session(ws.store, sid, model=model, config=ws.cfg, facts=given, goal=goal, against=good,
                                 at=at, progress=progress)
        notes = model_notes_for(ws.store, sid, model, ws.cfg)
    return ExplainResult(report, notes)
