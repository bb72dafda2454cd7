"""``ctxf facts`` (timelines, suggestions) and ``ctxf calibrate``: parse, call facts.py, render.

``ctxf facts SESSION`` is short for ``ctxf facts show SESSION``: the group falls back to
``show`` when its first argument is not a subcommand, so ``ctxf facts suggest SESSION`` and
``ctxf facts --help`` work as usual.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import click
import typer
from typer.core import TyperGroup

from .common import (
    ConfigOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    ParamOpt,
    PolicyOpt,
    SessionArg,
    app,
    handle_errors,
    open_store,
    parse_params,
    recorded_unless,
    session_json,
)


class _DefaultShowGroup(TyperGroup):
    """A group whose first argument, when it is not a subcommand name, goes to ``show``."""

    default = "show"

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if args and args[0] not in self.commands and args[0] not in ctx.help_option_names:
            args = [self.default, *args]
        return super().parse_args(ctx, args)


facts_app = typer.Typer(
    cls=_DefaultShowGroup,
    help="Track facts (constraints, numbers, names) through every step's window: "
         "`ctxf facts SESSION` (same as `ctxf facts show SESSION`), `ctxf facts suggest SESSION`.",
    no_args_is_help=True,
)
app.add_typer(facts_app, name="facts")

@facts_app.command("show")
@handle_errors
def facts_show(
    session: SessionArg,
    fact: Annotated[Optional[list[str]], typer.Option("--fact", help="A fact to track (repeatable).")] = None,
    facts_file: Annotated[
        Optional[list[Path]],
        typer.Option("--facts-file", help="Facts from a file: a YAML list, `facts: [...]`, or one per line."),
    ] = None,
    model: Annotated[
        Optional[str],
        typer.Option("--model", "-m", help="Replay under this model (what-if). Default: the log's own record."),
    ] = None,
    policy: PolicyOpt = None,
    param: ParamOpt = None,
    threshold: Annotated[
        Optional[float],
        typer.Option("--threshold", min=0.0, max=1.0,
                     help="Presence cosine (default: analysis_thresholds.fact_presence_cosine)."),
    ] = None,
    at: Annotated[Optional[int], typer.Option("--at", help="Also show each fact's state at this step.")] = None,
    long_window: Annotated[
        int,
        typer.Option("--long-window", min=1,
                     help="Windows of at least this many tokens count as long (a fact in their middle is at risk)."),
    ] = 32_000,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the timeline chart to a PNG/SVG file.")] = None,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Show when each fact entered, was at risk in, and left the window, step by step."""
    from ..embed.embedders import get_embedder
    from ..errors import UsageError
    from ..facts import FACTS_VERSION, gather_facts, track_facts
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.facts import facts_view
    from ..render.progress import ProgressBar
    from ..config.models import spec_notes
    from ..replay import prepare

    with open_store(config, db, models=model) as ws:
        cfg, store = ws.cfg, ws.store
        facts = gather_facts(fact, facts_file, cfg.facts)
        params = parse_params(param)
        th = cfg.analysis_thresholds.fact_presence_cosine if threshold is None else threshold
        sid, row = ws.session(session, fmt)
        if not facts:
            raise UsageError("no facts to track",
                             hint="give --fact TEXT, --facts-file FILE or a `facts:` list in the config; "
                                  f"`ctxf facts suggest {session}` proposes some")
        policy = recorded_unless(model, policy)
        prep = prepare(store, sid, model, config=cfg, policy=policy, params=params)
        if at is not None and not 1 <= at <= len(prep.inp.steps):
            raise UsageError(f"step {at} is out of range: this session has {len(prep.inp.steps)} step(s)",
                             hint="steps are model calls, numbered from 1")
        embedder = get_embedder(cfg.embedding.model)
        with ProgressBar(stderr_console(), "embedding", clock="remaining") as progress:
            report = track_facts(prep, facts, embedder, store, threshold=th, middle_min_tokens=long_window,
                                 cache_enabled=cfg.embedding.cache_enabled,
                                 ttl_hours=cfg.embedding.cache_ttl_hours, progress=progress)
    data: dict[str, Any] = {"version": FACTS_VERSION, "session": session_json(row), **report.to_dict(),
                            # the limits the windows rest on (assumed when the table cannot place the model)
                            "assumed": prep.spec.assumed_dict(), "model_notes": spec_notes(prep.spec)}
    if plot is not None:
        from ..render.plots_facts import facts_plot

        facts_plot(plot, data, title=f"{sid} {row.get('title') or ''}"[:80])
        stderr_console().print(f"wrote {plot}")
    if json_out:
        print_json(data)
    else:
        facts_view(stdout_console(), row, data, at=at)


@facts_app.command("suggest")
@handle_errors
def facts_suggest(
    session: SessionArg,
    limit: Annotated[int, typer.Option("--limit", min=1, help="At most this many suggestions.")] = 20,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Propose constraint-like sentences from the system prompt and the first user message."""
    from ..facts import suggest_facts
    from ..render.common import print_json, stdout_console
    from ..render.facts import suggestions_view

    with open_store(config, db) as ws:
        sid, row = ws.session(session, fmt)
        rows = [s.to_dict() for s in suggest_facts(ws.store.messages(sid), limit=limit)]
    if json_out:
        print_json(rows)
    else:
        suggestions_view(stdout_console(), row, rows)


@app.command()
@handle_errors
def calibrate(
    pairs: Annotated[Path, typer.Option("--pairs", help="Labelled pairs: CSV/TSV/JSONL/JSON/YAML with fact, text, present.")],
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Print precision and recall of fact presence per threshold on labelled pairs, and recommend one."""
    from ..embed.embedders import get_embedder
    from ..facts import calibrate as run_calibration
    from ..facts import load_pairs
    from ..render.common import print_json, stdout_console
    from ..render.facts import calibration_view

    with open_store(config, db) as ws:
        cfg = ws.cfg
        labelled = load_pairs(pairs)
        data = run_calibration(labelled, get_embedder(cfg.embedding.model), ws.store,
                               current=cfg.analysis_thresholds.fact_presence_cosine,
                               cache_enabled=cfg.embedding.cache_enabled)
    if json_out:
        print_json(data)
    else:
        calibration_view(stdout_console(), data)
