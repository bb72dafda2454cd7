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
    check_output,
    given_path,
    handle_errors,
    parse_params,
)


@app.command()
@handle_errors
def drift(
    session: SessionArg,
    goal: Annotated[Optional[str],
                    typer.Option("--goal", metavar="GOAL", help="The goal text (default: drift.goal from the "
                                                "config, else the system prompt and first user message).")] = None,
    model: Annotated[Optional[str],
                     typer.Option("--model", "-m", metavar="MODEL", help="Replay under this model for the "
                                                 "goal-left-window event (a what-if; names: `ctxf models`; default: "
                                                 "the log's own record).")] = None,
    policy: PolicyOpt = None,
    param: ParamOpt = None,
    window_size: Annotated[Optional[int], typer.Option(
        "--window-size", "-w", min=1, metavar="N",
        help="Judged replies per step (default: drift.window_size, 5).")] = None,
    plot: Annotated[Optional[Path], typer.Option("--plot", metavar="FILE", help="Write the drift curve to a PNG/SVG "
                                                                                "file.", parser=given_path)] = None,
    all_steps: Annotated[bool, typer.Option("--all-steps",
                                            help="List every step, not only verdict changes and events.")] = False,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Score each step's recent output against the goal: a drift curve with verdicts and reasons."""
    from .. import api
    from ..render.common import print_json, stderr_console, stdout_console, wrote
    from ..render.drift import drift_view
    from ..render.progress import ProgressBar

    check_output(plot, "--plot")
    with ProgressBar(stderr_console(), "encoding", command="ctxf drift", unit="texts") as progress:
        result = api.drift(session, goal=goal, model=model, policy=policy, params=parse_params(param),
                           window_size=window_size, fmt=fmt, db=db, config=config, progress=progress)
    data = result.to_dict()
    row = result.session
    if plot is not None:
        from ..render.plots_drift import drift_plot

        drift_plot(plot, data, title=f"goal drift · {row['id']} {row.get('title') or ''}"[:90])
        wrote(stderr_console(), plot)
    if json_out:
        print_json(data)
    else:
        drift_view(stdout_console(), row, data, all_steps=all_steps)
