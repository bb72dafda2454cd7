"""`ctxf audit` (rules over many sessions, for CI) and `ctxf report` (one session as HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from ..api.checks import on_disk
from ..api.workspace import open_store
from .common import ConfigOpt, DbOpt, JsonOpt, SessionArg, app, check_output, given_path, handle_errors


@app.command()
@handle_errors
def audit(
    paths: Annotated[Optional[list[str]], typer.Argument(
        help="Log files, folders, globs or fsspec URLs (s3://...) to audit (ingested on the fly). Default: every "
        "session in the store.",
        show_default=False, readable=False)] = None,  # an unreadable one fails alone, in the ingest
    fail_on: Annotated[Optional[str], typer.Option(
        "--fail-on", metavar="RULES", help="Comma-separated rules whose failures exit 3 (besides rules marked "
        "fail: true); rules: {rules}.")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", metavar="FILE",
                                                  help="Write a JUnit XML report here.", parser=given_path)] = None,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", metavar="FILE",
                                                     help="Write a Markdown summary here.", parser=given_path)] = None,
    executor: Annotated[Optional[str], typer.Option(
        "--executor", "-x", metavar="NAME", help="Where the audit runs: serial (this process), process (worker "
        "processes on this machine) or ray (a Ray cluster: pip install \"context-forensics[ray]\"). "
        "Default: process with --workers N > 1, else serial.", show_default=False)] = None,
    workers: Annotated[Optional[int], typer.Option(
        "--workers", "-w", min=1, metavar="N", help="Worker processes (process; --workers N alone means "
        "--executor process), or the CPUs of the local Ray (ray). Default: this machine's cores (at most 4 "
        "processes).", show_default=False)] = None,
    ray_address: Annotated[Optional[str], typer.Option(
        "--ray-address", metavar="ADDR", help="Join the Ray cluster at ADDR (host:port, or auto for the one this "
        "job runs in) instead of starting a local Ray; with --executor ray.")] = None,
    jsonl: Annotated[Optional[Path], typer.Option(
        "--jsonl", metavar="FILE", help="Stream one JSON line per audited session to FILE as results arrive "
        "(for very large runs; with PATHS).", parser=given_path)] = None,
    keep: Annotated[Optional[bool], typer.Option(
        "--store/--no-store", help="Keep the PATHS' sessions in the store (default: yes, except with --executor "
        "ray without --db: a cluster's logs are not funnelled into one file unless asked).",
        show_default=False)] = None,
    recursive: Annotated[bool,
                         typer.Option("--recursive/--no-recursive", "-r", help="Walk sub-folders of PATHS.")] = True,
    task: Annotated[Optional[str], typer.Option("--task", metavar="TASK", help="Only sessions of this task.")] = None,
    no_redact: Annotated[bool, typer.Option(
        "--no-redact", help="Store the PATHS' text as is: do not replace secrets.")] = False,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Audit sessions against the config's rules; exit 3 when a failing rule finds something."""
    from .. import api
    from ..errors import UsageError
    from ..render.audit import audit_view, run_notes, unreadable_problems
    from ..render.common import print_json, stderr_console, stdout_console, wrote
    from ..render.ingest import ingest_problems
    from ..render.progress import ProgressBar, RunProgress

    for raw in paths or []:  # a typo is a usage error before any work, not an empty audit
        if raw == "":  # Path("") is this folder: an empty argument would audit whatever lies here
            raise UsageError("an empty path", hint="give log files or folders (\".\" for this folder), or none "
                             "to audit every session in the store")
        p = Path(raw)
        if "://" in raw or any(c in raw for c in "*?["):
            continue  # a URL or a glob: listed (and refused when empty) by the driver
        if not p.exists() and not p.is_symlink():
            raise UsageError("no such file or folder", where=str(p),
                             hint="give log files or folders to audit, or none to audit every session in the store")
    check_output(junit, "--junit")
    check_output(markdown, "--markdown")
    check_output(jsonl, "--jsonl")
    if jsonl is not None and not paths:
        raise UsageError("--jsonl streams an audit of files", hint="give the logs' paths or URLs, or use --json")
    err = stderr_console()

    def problems(report: dict, unreadable: list[dict]) -> None:
        """What the on-the-fly ingest could not read, on stderr before the audit runs."""
        ingest_problems(err, report)  # failed files: their own error lines
        tried = {f["path"] for f in report["files"]}  # failed files already have their line
        unreadable_problems(err, [row for row in unreadable if row["path"] not in tried])

    from ..analysis.audit.runner import reporting

    sink = RunProgress(err, command="ctxf audit") if paths else ProgressBar(
        err, "audit", clock="elapsed", command="ctxf audit", unit="sessions", detail=True)
    with sink as progress, reporting(progress.doing):
        result = api.audit(paths, fail_on=fail_on, task=task, workers=workers, recursive=recursive, db=db,
                           config=config, progress=progress, ingested=problems,
                           redact=False if no_redact else None, executor=executor, ray_address=ray_address,
                           jsonl=jsonl, keep=keep)
    data = result.to_dict()
    if jsonl:
        wrote(err, jsonl)
    run_notes(err, data)
    if junit or markdown:
        from ..store.files import write_private_text

        if junit:
            write_private_text(junit, result.junit())  # 0600: it holds findings of private sessions
            wrote(err, junit)
        if markdown:
            write_private_text(markdown, result.markdown())
            wrote(err, markdown)
    if json_out:
        print_json(data)
    else:
        audit_view(stdout_console(), data)
    raise typer.Exit(result.exit_code)  # 1 when an input could not be read: the audit is incomplete; 130 Ctrl-C


@app.command()
@handle_errors
def report(
    session: SessionArg,
    html: Annotated[Path, typer.Option("--html", metavar="FILE",
                                       help="Write a self-contained HTML report to this file.", parser=given_path)],
    model: Annotated[Optional[list[str]], typer.Option(
        "--model", "-m", help="Also replay under this model (repeatable); the recorded replay is always shown. "
        "Facts and drift follow the first one's window. Names: `ctxf models`.")] = None,
    fact: Annotated[Optional[list[str]], typer.Option(
        "--fact", metavar="FACT", help="A fact to track (repeatable), with the config's facts: list.")] = None,
    goal: Annotated[Optional[str], typer.Option(
        "--goal", metavar="GOAL",
        help="The goal drift is judged against (default: drift.goal from the config, else the "
        "system prompt and first user message).")] = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write one session's forensics (verdict, utilization, events, facts, drift, worst window) as one HTML file."""
    from ..errors import CtxfError
    from ..render.common import print_json, stderr_console, wrote
    from ..render.html import session_report
    from ..store.files import write_private_text

    check_output(html, "--html")  # before the replay, facts and drift: a typo fails at once
    with open_store(db, config=config, models=model, create=on_disk(session)) as ws:
        sid = ws.resolve(session)
        page = session_report(ws, sid, models=model or [], facts=fact or None, goal=goal)
    try:
        write_private_text(html, page)  # 0600, whole or not at all: it holds the log's text
    except OSError as e:
        raise CtxfError(f"cannot write the report: {e.strerror or e}", where=str(html)) from None
    wrote(stderr_console(), html)
    if json_out:
        print_json({"version": 1, "session": sid, "html": str(html), "bytes": len(page.encode("utf-8"))})
