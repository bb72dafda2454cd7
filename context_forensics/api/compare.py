"""``ctxf replay SESSION --compare-policies``: which context strategies keep each fact to the end, at what cost."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checks import on_disk
from .workspace import ConfigLike, Workspace, session_json, using


@dataclass
class CompareResult:
    """``ctxf replay SESSION --compare-policies --json``: the session, and per policy its facts at
    the last step and its token cost (``analysis.facts.compare``)."""

    session: dict[str, Any]
    comparison: Any  # analysis.facts.compare.PolicyComparison
    model_notes: list[str] = field(default_factory=list)

    def kept_by(self, fact: str) -> list[str]:
        """The policies (labels) that keep ``fact`` to the last step."""
        return [r.label for r in self.comparison.rows
                if any(f["fact"] == fact and f["kept_to_end"] for f in r.facts)]

    def to_dict(self) -> dict[str, Any]:
        return {**self.comparison.to_dict(), "session": self.session, "model_notes": self.model_notes}


def compare_policies(session: str | Path, *, model: str | None = None, facts: str | Iterable[str] | None = None,
                     facts_file: str | Path | Iterable[str | Path] | None = None, threshold: float | None = None,
                     fmt: str | None = None, store: Workspace | None = None, db: str | Path | None = None,
                     config: ConfigLike = None, progress: Any = None) -> CompareResult:
    """Replay one session under ``model`` (default: the recorded one) with every simulation policy
    (default parameters) and the log's own record; per policy, whether each fact is still in the
    window at the last step, when it was lost, and the window tokens it costs.

    The facts are ``facts`` and those of ``facts_file``, else the config's ``facts:``; none at all
    raises ``UsageError`` saying how to give them. Loads the embedding model (offline); ``progress``
    receives ``(done, total)`` of the texts embedded.
    """
    from ..analysis.facts import gather_facts
    from ..analysis.facts.compare import compare_policies as run_compare
    from ..analysis.replay import model_notes_for
    from ..embed.embedders import embedder_for
    from ..errors import UsageError

    files = None if facts_file is None else (
        [Path(facts_file)] if isinstance(facts_file, (str, Path)) else [Path(p) for p in facts_file])
    with using(store, db, config, model, create=on_disk(session)) as ws:
        cfg = ws.cfg
        given = None if facts is None else [facts] if isinstance(facts, str) else list(facts)
        wanted = gather_facts(given, files, None if given or files else cfg.facts)
        sid, row = ws.session(str(session), fmt)
        if not wanted:
            raise UsageError("no facts to compare the policies on",
                             hint="give --fact TEXT (repeatable) or --facts-file FILE, or list them under `facts:` "
                                  f"in the config; `ctxf facts suggest {session}` proposes some")
        th = cfg.analysis_thresholds.fact_presence_cosine if threshold is None else threshold
        comparison = run_compare(ws.store, sid, model, wanted, embedder_for(cfg), config=cfg,
                                 threshold=th, cache_enabled=cfg.embedding.cache_enabled, progress=progress)
        notes = model_notes_for(ws.store, sid, model, cfg)
    return CompareResult(session_json(row), comparison, notes)
