"""``ctxf facts`` (timelines, suggestions) and ``ctxf calibrate``: parse, call the API / facts/, render.

``ctxf facts SESSION`` is short for ``ctxf facts show SESSION``: the group falls back to
``show`` when its first argument is not a subcommand, so ``ctxf facts suggest SESSION`` and
``ctxf facts --help`` work as usual.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from typer.core import TyperGroup

from ..api.checks import on_disk
from ..api.workspace import open_store
from .common import (
    ConfigOpt,
    DbOpt,
    FormatOpt,
    JsonOpt,
    ParamOpt,
    PolicyOpt,
    SessionArg,
    app,
    check_output,
    given_path,
    handle_errors,
    parse_params,
)


class _DefaultShowGroup(TyperGroup):
    """A group whose first argument, when it is not a subcommand name, goes to ``show``."""

    default = "show"

    # ctx: click's Context as typer has it (its own copy, typer._click, which no module may import by name)
    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
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
    fact: Annotated[Optional[list[str]],
                    typer.Option("--fact", metavar="FACT", help="A fact to track (repeatable).")] = None,
    facts_file: Annotated[
        Optional[list[Path]],
        typer.Option("--facts-file", metavar="FILE",
                     help="Facts from a file: a YAML list, `facts: [...]`, or one per line.", parser=given_path),
    ] = None,
    model: Annotated[
        Optional[str],
        typer.Option("--model", "-m", metavar="MODEL",
                     help="Replay under this model (what-if; names: `ctxf models`). Default: the log's own record."),
    ] = None,
    policy: PolicyOpt = None,
    param: ParamOpt = None,
    threshold: Annotated[
        Optional[float],
        typer.Option("--threshold", min=0.0, max=1.0, metavar="COSINE",
                     help="Presence cosine (default: analysis_thresholds.fact_presence_cosine)."),
    ] = None,
    at: Annotated[Optional[int],
                  typer.Option("--at", metavar="STEP", help="Also show each fact's state at this step.")] = None,
    long_window: Annotated[
        int,
        typer.Option("--long-window", min=1, metavar="TOKENS",
                     help="Windows of at least this many tokens count as long (a fact in their middle is at risk)."),
    ] = 32_000,
    plot: Annotated[Optional[Path], typer.Option("--plot", metavar="FILE", help="Write the timeline chart to a PNG/SVG "
                                                                                "file.", parser=given_path)] = None,
    exhaustive: Annotated[
        bool,
        typer.Option("--exhaustive",
                     help="Embed every chunk (the full method), not only those that could hold a fact; "
                          "near misses then come from every chunk."),
    ] = False,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Show when each fact entered, was at risk in, and left the window, step by step."""
    from .. import api
    from ..render.common import print_json, stderr_console, stdout_console, wrote
    from ..render.facts import facts_view
    from ..render.progress import ProgressBar

    check_output(plot, "--plot")
    with ProgressBar(stderr_console(), "encoding", clock="remaining", command="ctxf facts",
                     unit="texts") as progress:
        result = api.facts(session, fact, facts_file=facts_file, model=model, policy=policy,
                           params=parse_params(param), threshold=threshold, long_window=long_window, at=at,
                           fmt=fmt, db=db, config=config, progress=progress, exhaustive=exhaustive)
    data = result.to_dict()
    row = result.session
    if plot is not None:
        from ..render.plots_facts import facts_plot

        facts_plot(plot, data, title=f"{row['id']} {row.get('title') or ''}"[:80])
        wrote(stderr_console(), plot)
    if json_out:
        print_json(data)
    else:
        facts_view(stdout_console(), row, data, at=at)


@facts_app.command("suggest")
@handle_errors
def facts_suggest(
    session: SessionArg,
    limit: Annotated[int, typer.Option("--limit", min=1, metavar="N", help="At most this many suggestions.")] = 20,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Propose constraint-like sentences from the system prompt and the first user message."""
    from ..analysis.facts import suggest_facts
    from ..render.common import print_json, stdout_console
    from ..render.facts import suggestions_view

    with open_store(db, config=config, create=on_disk(session)) as ws:
        sid, row = ws.session(session, fmt)
        rows = [s.to_dict() for s in suggest_facts(ws.store.messages(sid), limit=limit)]
    if json_out:
        print_json({"version": 1, "suggestions": rows})
    else:
        suggestions_view(stdout_console(), row, rows)


@app.command()
@handle_errors
def calibrate(
    pairs: Annotated[Path, typer.Option("--pairs", metavar="FILE", help="Labelled pairs: CSV/TSV/JSONL/JSON/YAML with "
                                                                        "fact, text, present.", parser=given_path)],
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Print precision and recall of fact presence per threshold on labelled pairs, and recommend one."""
    from ..analysis.facts import calibrate as run_calibration, load_pairs
    from ..embed.embedders import embedder_for
    from ..render.common import print_json, stdout_console
    from ..render.facts import calibration_view

    with open_store(db, config=config) as ws:
        cfg = ws.cfg
        labelled = load_pairs(pairs)
        data = run_calibration(labelled, embedder_for(cfg), ws.store,
                               current=cfg.analysis_thresholds.fact_presence_cosine,
                               cache_enabled=cfg.embedding.cache_enabled)
    if json_out:
        print_json(data)
    else:
        calibration_view(stdout_console(), data)
