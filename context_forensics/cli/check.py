"""``ctxf check``: what each session's log records against what ctxf reconstructs."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .common import ConfigOpt, DbOpt, FormatOpt, JsonOpt, app, handle_errors


@app.command()
@handle_errors
def check(
    sessions: Annotated[Optional[list[str]], typer.Argument(
        metavar="[SESSION|PATH]...", help="Session ids, unique id prefixes or log paths (default: every session "
        "of the store).", show_default=False)] = None,
    only: Annotated[Optional[list[str]], typer.Option(
        "--check", metavar="NAME", help="Run only this check (repeatable): prompt_vs_window, recorded_shrink, "
        "calibration, compactions, summary_counts, edits, tool_pairs, facts.")] = None,
    fact: Annotated[Optional[list[str]], typer.Option(
        "--fact", metavar="FACT", help="A fact to check for (repeatable): found verbatim in a window but reported "
        "absent is an inconsistency. Loads the embedding model.")] = None,
    fail: Annotated[bool, typer.Option("--fail", help="Exit 3 when any session is inconsistent.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List the consistent sessions too.")] = False,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Cross-check each session's log against ctxf's reconstruction; list every disagreement.

    Recorded prompt vs rebuilt window (beyond 25%), a recorded prompt that shrinks with no
    recorded edit, the calibration's plausibility, recorded vs counted compactions, the summary's
    counts vs the events listed, edit calls vs edits seen, tool calls vs results, and (with
    --fact) a fact found verbatim but reported absent. Each finding names its step and figures.
    """
    from .. import api
    from ..render.check import check_view
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.progress import ProgressBar

    with ProgressBar(stderr_console(), "checking", command="ctxf check", unit="sessions") as progress:
        result = api.check(sessions or None, only=only, facts=fact, fmt=fmt, db=db, config=config,
                           progress=progress)
    data = result.to_dict()
    if json_out:
        print_json(data)
    else:
        check_view(stdout_console(), data, verbose=verbose)
    if fail and not result.consistent:
        raise typer.Exit(result.exit_code)
