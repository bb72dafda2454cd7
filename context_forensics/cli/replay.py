"""`ctxf replay` and `ctxf models`: the window of every model call, and the model table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import (
    ConfigOpt, DbOpt, FormatOpt, JsonOpt, ParamOpt, PolicyOpt, SessionArg, app, handle_errors, open_store,
    parse_params, recorded_unless, session_json,
)


# ---------------------------------------------------------------- replay


@app.command()
@handle_errors
def replay(
    session: SessionArg,
    model: Annotated[
        Optional[list[str]],
        typer.Option("--model", "-m", help="Model to replay under (repeat for a side-by-side what-if). "
                                           "Default: the session's recorded model."),
    ] = None,
    policy: PolicyOpt = None,
    param: ParamOpt = None,
    at: Annotated[Optional[int], typer.Option("--at", help="Print the exact window of this step (of each --model).")] = None,
    full: Annotated[bool, typer.Option("--full", help="With --at: print whole message texts, not previews.")] = False,
    plot: Annotated[Optional[Path], typer.Option("--plot", help="Write the utilization curve to a PNG/SVG file.")] = None,
    all_steps: Annotated[bool, typer.Option("--all-steps", help="List every step, not only the eventful ones.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Recompute instead of reading a stored replay.")] = False,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Replay each model call: what was in the window, and what had been lost."""
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.replay import replay_view, window_view
    from ..replay import REPLAY_VERSION, replay_session, window_at

    with open_store(config, db, models=model) as ws:
        cfg, store = ws.cfg, ws.store
        params = parse_params(param)
        alert = cfg.analysis_thresholds.min_context_utilization_alert
        sid, row = ws.session(session, fmt)
        models: list[str | None] = list(model) if model else [None]  # None: the recorded model (or assumed)
        policy = recorded_unless(model, policy)
        if at is not None:
            wins = [window_at(store, sid, at, m, config=cfg, policy=policy, params=params) for m in models]
            # One model: its window. Several: the first one's keys as before, and every window.
            data = wins[0] if len(wins) == 1 else {**wins[0], "windows": wins}
            if json_out:
                print_json(data)
            else:
                window_view(stdout_console(), data, full=full)
            return
        reps = [replay_session(store, sid, m, config=cfg, policy=policy, params=params, alert=alert,
                               use_cache=not no_cache).to_dict() for m in models]
    if plot is not None:
        from ..render.plots import utilization_plot

        utilization_plot(plot, reps, title=f"{sid} {row.get('title') or ''}"[:80])
        stderr_console().print(f"wrote {plot}")
    if json_out:
        print_json({"version": REPLAY_VERSION, "session": session_json(row), "replays": reps})
    else:
        replay_view(stdout_console(), row, reps, all_steps=all_steps)


@app.command()
@handle_errors
def models(
    names: Annotated[Optional[list[str]], typer.Argument(
        help="Model names to look up: which table entry (or mapping) each resolves to, and by which rule.",
        show_default=False)] = None,
    json_out: JsonOpt = False,
    config: ConfigOpt = None,
) -> None:
    """List known models: tokenizer, context limit, reserved output, policy and date checked."""
    from ..config.settings import load_config
    from ..config.models import all_models, family_rules, resolve_model
    from ..render.common import print_json, stdout_console
    from ..render.config import models_lookup, models_table

    cfg = load_config(config)
    if names:  # an unknown name exits 2 with the closest known ones
        found = [resolve_model(n, cfg).to_dict() for n in names]
        if json_out:
            print_json(found)
        else:
            models_lookup(stdout_console(), found)
        return
    rows = [m.to_dict() for m in all_models(cfg)]
    if json_out:
        print_json(rows)
    else:
        models_table(stdout_console(), rows, family_rules())
