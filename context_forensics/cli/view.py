"""``ctxf view``: a page to walk through a session's steps (or two runs' divergence) in a browser."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import (
    ConfigOpt,
    DbOpt,
    FormatOpt,
    ParamOpt,
    PolicyOpt,
    app,
    check_output,
    given_path,
    handle_errors,
    parse_params,
)


def _has_display() -> bool:
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


@app.command()
@handle_errors
def view(
    session: Annotated[str, typer.Argument(metavar="SESSION", help="Session id, unique id prefix, or log file path.")],
    other: Annotated[Optional[str], typer.Argument(
        metavar="B", help="A second run: the page shows where it parted from SESSION (the good run first), "
                            "as `ctxf diverge A B`.", show_default=False)] = None,
    model: Annotated[Optional[list[str]], typer.Option(
        "--model", "-m", metavar="MODEL", help="Also replay under this model (repeatable: side by side or switched); "
        "the recorded replay is always shown. Names: `ctxf models`.")] = None,
    fact: Annotated[Optional[list[str]], typer.Option(
        "--fact", metavar="FACT", help="A fact to track in each model's window (repeatable; default: the config's "
        "facts: list). Loads the embedding model.")] = None,
    goal: Annotated[Optional[str], typer.Option(
        "--goal", metavar="GOAL", help="Draw the drift curve against this goal (loads the embedding model).")] = None,
    drift: Annotated[bool, typer.Option(
        "--drift", help="Draw the drift curve against the default goal (drift.goal, else the system prompt and "
                        "first user message).")] = False,
    policy: PolicyOpt = None,
    param: ParamOpt = None,
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", metavar="FILE", help="The page to write (default: ctxf-view-ID.html in the current folder).",
        parser=given_path)] = None,
    open_page: Annotated[bool, typer.Option("--open",
                                            help="Open the page in your browser (when there is a display).")] = False,
    fmt: FormatOpt = None,
    json_out: Annotated[bool, typer.Option("--json",
                                           help="Print the page's data as JSON instead of writing the page.")] = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write a page to walk through the steps: what the model saw at each one, what it had lost.

    One self-contained HTML file (no network: it works from file:// and as a CI artifact).
    Deep links: PAGE#step=N&model=M&fact=K (two runs: #a=N&b=M).
    """
    from .. import api
    from ..render.common import print_json, safe, stderr_console, stdout_console
    from ..render.progress import ProgressBar
    from ..render.view import write_view

    if not json_out:
        check_output(output, "-o")
    with ProgressBar(stderr_console(), "encoding", command="ctxf view", unit="texts") as progress:
        result = api.view(session, other, model=model, facts=fact, goal=goal, drift=drift, policy=policy,
                          params=parse_params(param), fmt=fmt, db=db, config=config, progress=progress)
    data = result.to_dict()
    if json_out:
        print_json(data)
        return
    ids = [r["session"]["id"] for r in data["runs"]]
    path = output if output is not None else Path(f"ctxf-view-{'-vs-'.join(ids)}.html")
    if output is None:
        check_output(path, "-o")
    size = write_view(path, data)
    out = stdout_console()
    runs = data["runs"]
    if len(runs) == 1:
        n = len(runs[0]["models"])
        m = len(runs[0]["steps"])
        what = f"{m:,} step{'s' if m != 1 else ''}, {n} replay{'s' if n != 1 else ''}"
    else:
        what = f"A {len(runs[0]['steps']):,} steps, B {len(runs[1]['steps']):,} steps, divergence view"
    weight = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{max(1, round(size / 1e3))} kB"
    out.print(safe(f"{path} ({weight}; {what})"))
    for note in data["notes"]:
        stderr_console().print(safe(f"note: {note}"))
    if open_page:
        err = stderr_console()
        if not _has_display():
            err.print(safe(f"no display to open a browser on: open {path.resolve()} in one"))
            return
        import webbrowser

        if not webbrowser.open(path.resolve().as_uri()):
            err.print(safe(f"no browser found: open {path.resolve()} in one"))
