"""``ctxf explain``: did context cause this failed run, at which step, and what would have saved it."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .common import ConfigOpt, DbOpt, FormatOpt, JsonOpt, SessionArg, app, handle_errors


@app.command()
@handle_errors
def explain(
    session: SessionArg,
    model: Annotated[Optional[str], typer.Option(
        "--model", "-m", metavar="MODEL", help="Replay under this model and its overflow policy (a what-if; "
        "default: the log's own model and record). Names: `ctxf models`.")] = None,
    fact: Annotated[Optional[list[str]], typer.Option(
        "--fact", metavar="FACT", help="A constraint the run had to keep (repeatable; default: the config's "
        "facts: list, else the sentences `ctxf facts suggest` proposes, marked suggested).")] = None,
    goal: Annotated[Optional[str], typer.Option(
        "--goal", metavar="GOAL", help="The goal for the drift verdict (default: drift.goal, else the system "
        "prompt and first user message).")] = None,
    against: Annotated[Optional[str], typer.Option(
        "--against", metavar="GOOD_RUN", help="A good run of the same task to diverge from (default: a success "
        "of the same task in the store).")] = None,
    at: Annotated[Optional[int], typer.Option(
        "--at", metavar="STEP", help="The decisive step (default: the first action that broke a constraint, the "
        "last edit before a failing check, or the final submission).")] = None,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Did context cause this failure? The verdict, its reasons and the step they rest on.

    Verdicts: contributed (context likely contributed), not_limiting (context did not limit this
    run), unknown (with why). Every reason names its step, seq and event: check it with
    `ctxf replay SESSION --at STEP` or `ctxf view SESSION` (#step=STEP). Loads the embedding model.
    """
    from .. import api
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.explain import explain_view
    from ..render.progress import ProgressBar

    with ProgressBar(stderr_console(), "encoding", command="ctxf explain", unit="texts") as progress:
        result = api.explain(session, model=model, facts=fact, goal=goal, against=against, at=at, fmt=fmt, db=db,
                             config=config, progress=progress)
    data = result.to_dict()
    if json_out:
        print_json(data)
    else:
        explain_view(stdout_console(), data)
