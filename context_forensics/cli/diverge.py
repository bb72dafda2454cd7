"""``ctxf diverge``: where a failed run first parted ways with a successful run of the same task.

Registered on the main Typer app by importing this module (``cli/__init__`` does it); the work
is ``api.diverge`` / ``api.divergences`` (over ``diverge/``), the tables and panels ``render/diverge``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .common import ConfigOpt, DbOpt, JsonOpt, app, handle_errors


@app.command()
@handle_errors
def diverge(
    a: Annotated[str | None, typer.Argument(metavar="A", help="Run A (the good one): id, id prefix or log file.",
                                               show_default=False)] = None,
    b: Annotated[str | None,
                 typer.Argument(metavar="B", help="Run B: id, id prefix or log file.", show_default=False)] = None,
    task: Annotated[str | None,
                    typer.Option("--task", metavar="TASK", help="Pick a success (A) and a failure (B) of this task "
                                                               "from the store.")] = None,
    all_tasks: Annotated[bool, typer.Option("--all-tasks", help="Every task with both outcomes: one line per "
                                                                "success/failure pair.")] = False,
    model: Annotated[str | None, typer.Option(
        "--model", "-m", metavar="MODEL",
        help="Replay both runs under this model (what-if; names: `ctxf models`). Default: each run's recorded "
             "model and the recorded policy.")] = None,
    strict: Annotated[bool,
                      typer.Option("--strict", help="Count read-only detours that rejoin as divergences.")] = False,
    all_rows: Annotated[bool, typer.Option("--all", help="Show every aligned event, not only those around the "
                                                         "divergence.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Compare every aligned pair with the embedding model, also "
                                                      "after the divergence (slower on long runs).")] = False,
    fmt: Annotated[str | None, typer.Option("--format", "-f",
                                            help="Force the format of file arguments (see `ctxf formats`).")] = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Find the earliest divergence between two runs of the same task, and its cause."""
    from .. import api
    from ..errors import UsageError
    from ..render.common import print_json, safe, stderr_console, stdout_console
    from ..render.diverge import diverge_view, pairs_table
    from ..render.progress import ProgressBar

    modes = sum([a is not None or b is not None, task is not None, all_tasks])
    if modes != 1 or (a is not None and b is None):
        raise UsageError("give two runs (A B), or --task KEY, or --all-tasks",
                         hint="e.g. `ctxf diverge good.traj.json bad.traj.json` or `ctxf diverge --all-tasks`")
    err = stderr_console()
    if all_tasks:
        with ProgressBar(err, "encoding", command="ctxf diverge", unit="texts") as progress:
            pairs = api.divergences(progress=progress, model=model, strict=strict, full=full, db=db,
                                    config=config).to_dict()
        if json_out:
            print_json(pairs)
        else:
            pairs_table(stdout_console(), pairs["pairs"])
        return
    with ProgressBar(err, "encoding", command="ctxf diverge", unit="texts") as progress:
        result = api.diverge(a, b, task=task, fmt=fmt, progress=progress, model=model, strict=strict, full=full,
                             db=db, config=config)
    for note in result.notes:
        err.print(safe(note))
    data = result.to_dict()
    if json_out:
        print_json(data)
    else:
        diverge_view(stdout_console(), data, all_rows=all_rows)
