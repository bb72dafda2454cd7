"""`ctxf replay` and `ctxf models`: the window of every model call, and the model table."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Optional

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

# ---------------------------------------------------------------- replay


@app.command()
@handle_errors
def replay(
    session: SessionArg,
    model: Annotated[
        Optional[list[str]],
        typer.Option("--model", "-m", metavar="MODEL",
                     help="Model to replay under (repeat for a side-by-side what-if; names: `ctxf models`). "
                          "Default: the session's recorded model."),
    ] = None,
    policy: PolicyOpt = None,
    param: ParamOpt = None,
    at: Annotated[Optional[int], typer.Option("--at", metavar="STEP",
                                              help="Print the exact window of this step (of each --model).")] = None,
    full: Annotated[bool, typer.Option("--full", help="With --at: print whole message texts, not previews.")] = False,
    plot: Annotated[Optional[Path], typer.Option("--plot", metavar="FILE",
                                                 help="Write the utilization curve to a PNG/SVG file.",
                                                 parser=given_path)] = None,
    all_steps: Annotated[bool,
                         typer.Option("--all-steps", help="List every step, not only the eventful ones.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Recompute instead of reading a stored replay.")] = False,
    compare_policies: Annotated[bool, typer.Option(
        "--compare-policies", help="Replay under every policy (defaults) and the log's record: which keep each "
                                   "fact to the last step, when each lost it, at what token cost.")] = False,
    fact: Annotated[Optional[list[str]], typer.Option(
        "--fact", metavar="FACT", help="With --compare-policies: a fact to compare on (repeatable; default: the "
                                       "config's facts).")] = None,
    facts_file: Annotated[Optional[list[Path]], typer.Option(
        "--facts-file", metavar="FILE", help="With --compare-policies: facts from a file (YAML list or one per line).",
        parser=given_path)] = None,
    overhead_from: Annotated[Optional[str], typer.Option(
        "--overhead-from", metavar="CAPTURE",
        help="A stored request capture (a HAR file's session) whose system prompt and tools every call adds "
             "where the log lacks them. Default: a capture of the same agent version, if stored; "
             "`none`: none.")] = None,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Replay each model call: what was in the window, and what had been lost."""
    from .. import api
    from ..render.common import print_json, stderr_console, stdout_console, wrote
    from ..render.replay import replay_view, window_view

    check_output(plot, "--plot")
    params = parse_params(param)
    if compare_policies or fact or facts_file:
        if overhead_from is not None:
            from ..errors import UsageError

            raise UsageError("--overhead-from goes with a replay, not --compare-policies (which takes a capture "
                             "of the same agent version when the store holds one)")
        _compare(session, model, policy, params, at, plot, compare_policies, fact, facts_file, fmt, json_out, db,
                 config)
        return
    if at is not None:
        data = api.window(session, at, model=model, policy=policy, params=params, fmt=fmt, db=db, config=config,
                          overhead_from=overhead_from).to_dict()
        if json_out:
            print_json(data)
        else:
            window_view(stdout_console(), data, full=full)
        return
    result = api.replay(session, use_cache=not no_cache, model=model, policy=policy, params=params, fmt=fmt, db=db,
                        config=config, overhead_from=overhead_from)
    data = result.to_dict()
    row = result.session
    if plot is not None:
        from ..render.plots import utilization_plot

        utilization_plot(plot, data["replays"], title=f"{row['id']} {row.get('title') or ''}"[:80])
        wrote(stderr_console(), plot)
    if json_out:
        print_json(data)
    else:
        replay_view(stdout_console(), row, data["replays"], all_steps=all_steps, check=data.get("check"))


def _compare(session: str, model: list[str] | None, policy: str | None, params: dict, at: int | None,
             plot: Path | None, compare: bool, fact: list[str] | None, facts_file: list[Path] | None,
             fmt: str | None, json_out: bool, db: Path | None, config: Path | None) -> None:
    """``--compare-policies``: one model, every policy; the options that pick one policy or step do not apply."""
    from .. import api
    from ..errors import UsageError
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.compare import compare_view
    from ..render.progress import ProgressBar

    if not compare:
        raise UsageError("--fact and --facts-file go with --compare-policies",
                         hint="`ctxf replay SESSION --model M --compare-policies --fact TEXT`; to track facts "
                              "under one policy, `ctxf facts SESSION --fact TEXT --policy P`")
    clash = [name for name, given in (("--policy", policy), ("--param", params), ("--at", at is not None),
                                      ("--plot", plot)) if given]
    if clash or len(model or []) > 1:
        raise UsageError("--compare-policies replays every policy of one model: "
                         f"{', '.join(clash) or 'several --model'}"
                         " does not apply", hint="give one --model (or none: the recorded model)")
    with ProgressBar(stderr_console(), "encoding", clock="remaining", command="ctxf replay",
                     unit="texts") as progress:
        result = api.compare_policies(session, model=model[0] if model else None, facts=fact, facts_file=facts_file,
                                      fmt=fmt, db=db, config=config, progress=progress)
    if json_out:
        print_json(result.to_dict())
    else:
        compare_view(stdout_console(), result.to_dict())


@app.command()
@handle_errors
def models(
    names: Annotated[Optional[list[str]], typer.Argument(
        metavar="MODEL", help="Model names to look up: which table entry (or mapping) each resolves to, and by "
        "which rule.", show_default=False)] = None,
    json_out: JsonOpt = False,
    db: Annotated[Optional[Path], typer.Option(
        "--db", metavar="PATH", help="A store: with no MODEL, look up the models its sessions recorded "
        "(the whole table when they recorded none).", parser=given_path)] = None,
    config: ConfigOpt = None,
) -> None:
    """List known models: tokenizer, context limit, reserved output, policy and date checked."""
    from ..config.models import all_models, family_rules, resolve_model
    from ..config.settings import load_config
    from ..render.common import print_json, stdout_console
    from ..render.config import models_lookup, models_table

    cfg = load_config(config)
    if db is not None and not names:
        from ..api.workspace import open_store

        with open_store(db, config=config, create=False) as ws:  # no store there: exit 2, none created
            names = sorted({m for r in ws.sessions() for m in [r["model"], *r["models"]] if m})
    from ..tokens.tokenizers import tokenizer_status

    def row(spec: Any) -> dict[str, Any]:  # what the tokenizer's counts are worth, and why
        return {**spec.to_dict(), "tokenizer_status": tokenizer_status(spec.tokenizer)}

    if names:  # an unknown name exits 2 with the closest known ones
        found = [row(resolve_model(n, cfg)) for n in names]
        if json_out:
            print_json({"version": 1, "models": found})
        else:
            models_lookup(stdout_console(), found)
        return
    rows = [row(m) for m in all_models(cfg)]
    if json_out:
        print_json({"version": 1, "models": rows})
    else:
        models_table(stdout_console(), rows, family_rules())
