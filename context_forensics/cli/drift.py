"""``ctxf drift``: how far each step's recent output has moved from the session's goal."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

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


@app.command()
@handle_errors
def drift(
    session: SessionArg,
    goal: Annotated[Optional[str], typer.Option("--goal", help="The goal text (default: drift.goal from the "
                                                "config, else the system prompt and first user message).")] = None,
    model: Annotated[Optional[str], typer.Option("--model", "-m", help="Replay under this model for the "
                                                 "goal-left-window event (a what-if; default: the log's own record).")] = None,
    policy: PolicyOpt = None,
    param: ParamOpt = None,
    window_size: Annotated[Optional[int], typer.Option("--window-size", "-w", min=1,
                                                       help="Judged replies per step (default: drift.window_size, 5).")] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the drift curve to a PNG/SVG file.")] = None,
    all_steps: Annotated[bool, typer.Option("--all-steps", help="List every step, not only verdict changes and events.")] = False,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Score each step's recent output against the goal: a drift curve with verdicts and reasons."""
    from ..drift import drift_session
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.drift import drift_view
    from ..render.progress import ProgressBar
    from ..replay import model_notes_for

    with open_store(config, db, models=model) as ws:
        cfg, store = ws.cfg, ws.store
        params = parse_params(param)
        policy = recorded_unless(model, policy)  # ground truth first, as in `ctxf replay`
        sid, row = ws.session(session, fmt)
        with ProgressBar(stderr_console(), "embedding") as progress:
            report = drift_session(store, sid, model, config=cfg, policy=policy, params=params, goal=goal,
                                   window_size=window_size, progress=progress).to_dict()
        # the limits the goal-window events rest on (assumed when the table cannot place the model)
        report["model_notes"] = model_notes_for(store, sid, model, cfg) if report.get("model") else []
    if plot is not None:
        from ..render.plots_drift import drift_plot

        drift_plot(plot, report, title=f"goal drift · {sid} {row.get('title') or ''}"[:90])
        stderr_console().print(f"wrote {plot}")
    if json_out:
        print_json({"version": report.pop("version"), "session": session_json(row), **report})
    else:
        drift_view(stdout_console(), row, report, all_steps=all_steps)
