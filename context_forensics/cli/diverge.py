"""``ctxf diverge``: where a failed run first parted ways with a successful run of the same task.

Registered on the main Typer app by importing this module (``cli.py`` does it); the work is in
``diverge.py``, the tables and panels in ``render_diverge.py``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from .common import ConfigOpt, DbOpt, JsonOpt, app, handle_errors, open_store


@app.command()
@handle_errors
def diverge(
    a: Annotated[str | None, typer.Argument(help="Run A (the good one): id, id prefix or log file.",
                                               show_default=False)] = None,
    b: Annotated[str | None, typer.Argument(help="Run B: id, id prefix or log file.", show_default=False)] = None,
    task: Annotated[str | None, typer.Option("--task", help="Pick a success (A) and a failure (B) of this task "
                                                               "from the store.")] = None,
    all_tasks: Annotated[bool, typer.Option("--all-tasks", help="Every task with both outcomes: one line per "
                                                                "success/failure pair.")] = False,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Replay both runs under this model "
                                                                       "(what-if). Default: each run's recorded "
                                                                       "model and the recorded policy.")] = None,
    strict: Annotated[bool, typer.Option("--strict", help="Count read-only detours that rejoin as divergences.")] = False,
    all_rows: Annotated[bool, typer.Option("--all", help="Show every aligned event, not only those around the "
                                                         "divergence.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Compare every aligned pair with the embedding model, also "
                                                      "after the divergence (slower on long runs).")] = False,
    fmt: Annotated[str | None, typer.Option("--format", "-f", help="Force the format of file arguments.")] = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Find the earliest divergence between two runs of the same task, and its cause."""
    from ..diverge import DIVERGE_VERSION, task_pairs
    from ..diverge import diverge as run_diverge
    from ..errors import UsageError
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.diverge import diverge_view, pairs_table
    from ..render.progress import ProgressBar
    from ..replay import model_notes_for

    modes = sum([a is not None or b is not None, task is not None, all_tasks])
    if modes != 1 or (a is not None and b is None):
        raise UsageError("give two runs (A B), or --task KEY, or --all-tasks",
                         hint="e.g. `ctxf diverge good.traj.json bad.traj.json` or `ctxf diverge --all-tasks`")
    err = stderr_console()
    with open_store(config, db, models=model) as ws, ProgressBar(err, "embed") as progress:
        cfg, store = ws.cfg, ws.store
        kw = {"model": model, "config": cfg, "progress": progress, "tolerate_detours": not strict, "full": full}
        if all_tasks:
            out = []
            pairs = task_pairs(store)
            for t, sa, sb in pairs:
                rep = run_diverge(store, sa, sb, **kw)  # type: ignore[arg-type]
                out.append({"task": t, **rep.summary(t), "divergence": rep.divergence})
            if json_out:
                print_json({"version": DIVERGE_VERSION, "pairs": out})
            else:
                pairs_table(stdout_console(), out)
            return
        if task is not None:
            pairs = task_pairs(store, task)
            if not pairs:
                raise UsageError(f"task {task!r} has no pair of a success and a failure run in the store",
                                 hint="see `ctxf sessions --task KEY`; set outcomes with `ctxf ingest --outcome`")
            _, sa, sb = pairs[0]
            if len(pairs) > 1:
                err.print(f"task {task}: {len(pairs)} success/failure pairs; comparing the first "
                          f"({sa} vs {sb}); --all-tasks lists them all", highlight=False)
        else:
            sa = ws.resolve(a, fmt)  # type: ignore[arg-type]
            sb = ws.resolve(b, fmt)  # type: ignore[arg-type]
        rep = run_diverge(store, sa, sb, **kw).to_dict()  # type: ignore[arg-type]
        for side, sid in (("a", sa), ("b", sb)):  # the limits each run's window figures rest on
            if rep[side].get("replay") is not None:
                rep[side]["replay"]["model_notes"] = model_notes_for(store, sid, model, cfg)
    if json_out:
        print_json(rep)
    else:
        diverge_view(stdout_console(), rep, all_rows=all_rows)
