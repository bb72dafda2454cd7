"""`ctxf audit` (rules over many sessions, for CI) and `ctxf report` (one session as HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .common import ConfigOpt, DbOpt, JsonOpt, SessionArg, app, handle_errors, open_store


@app.command()
@handle_errors
def audit(
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Log files or folders to audit (ingested on the fly). Default: every session in the store.",
        show_default=False)] = None,
    fail_on: Annotated[Optional[str], typer.Option(
        "--fail-on", help="Comma-separated rules whose failures exit 3 (besides rules marked fail: true).")] = None,
    junit: Annotated[Optional[Path], typer.Option("--junit", help="Write a JUnit XML report here.")] = None,
    markdown: Annotated[Optional[Path], typer.Option("--markdown", help="Write a Markdown summary here.")] = None,
    workers: Annotated[int, typer.Option("--workers", "-w", min=1, help="Audit sessions in N processes.")] = 1,
    recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Walk sub-folders of PATHs.")] = True,
    task: Annotated[Optional[str], typer.Option("--task", help="Only sessions of this task.")] = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Audit sessions against the config's rules; exit 3 when a failing rule finds something."""
    from ..audit import audit_many, junit_xml, markdown as to_markdown, unreadable_inputs
    from ..config.audit_rules import RULE_PARAMS, parse_audit
    from ..errors import UsageError
    from ..store.ingest import ingest_paths
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.ingest import ingest_problems
    from ..render.audit import audit_view, unreadable_problems
    from ..render.progress import ProgressBar

    ws = open_store(config, db)
    cfg, store = ws.cfg, ws.store
    rules = parse_audit(cfg.audit, cfg.source, cfg)
    fail_set = {r.strip() for r in (fail_on or "").split(",") if r.strip()}
    unknown = fail_set - set(RULE_PARAMS)
    if unknown:
        raise UsageError(f"--fail-on names unknown rule(s): {', '.join(sorted(unknown))}",
                         hint="known rules: " + ", ".join(RULE_PARAMS))
    missing = fail_set - {r.name for r in rules}
    if missing:
        raise UsageError(f"--fail-on names rule(s) not enabled in the config: {', '.join(sorted(missing))}",
                         hint="add them under audit.rules in the config")
    err = stderr_console()
    unreadable: list[dict] = []
    ignored: list[str] = []
    not_read: list[dict] = []
    with ws:
        if paths:
            report = ingest_paths(store, paths, recursive=recursive).to_dict()
            # Every input it could not read is a row of the audit's reports (and exit 1), not only a
            # line on stderr: a CI summary must not look green over logs nobody checked.
            unreadable, ignored, not_read = unreadable_inputs(report, exclude=(cfg.source,) if cfg.source else ())
            ingest_problems(err, {**report, "ignored": ignored})  # failed files: their own error lines
            tried = {f["path"] for f in report["files"]}  # failed ones already have their error line
            unreadable_problems(err, [row for row in unreadable if row["path"] not in tried])
            wanted = {s for f in report["files"] for s in f["sessions"]}
        # Store order (start time, then id) whatever the argument order or the worker count.
        ids = [s["id"] for s in store.sessions(task=task) if not paths or s["id"] in wanted]
        db_path = str(store.path) if store.path else ":memory:"
    with ProgressBar(err, "audit", clock="elapsed") as progress:
        result = audit_many(db_path, ids, cfg, rules, workers=workers, fail_on=fail_set, progress=progress,
                            unreadable=unreadable, ignored=ignored, not_read=not_read)
    if junit:
        junit.parent.mkdir(parents=True, exist_ok=True)
        junit.write_text(junit_xml(result))
        err.print(f"wrote {junit}")
    if markdown:
        markdown.parent.mkdir(parents=True, exist_ok=True)
        markdown.write_text(to_markdown(result))
        err.print(f"wrote {markdown}")
    if json_out:
        print_json(result)
    else:
        audit_view(stdout_console(), result)
    raise typer.Exit(result["exit_code"])  # 1 when an input could not be read: the audit is incomplete


@app.command()
@handle_errors
def report(
    session: SessionArg,
    html: Annotated[Path, typer.Option("--html", help="Write a self-contained HTML report to this file.")],
    model: Annotated[Optional[list[str]], typer.Option(
        "--model", "-m", help="Also replay under this model (repeatable); the recorded replay is always shown.")] = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write one session's forensics (utilization, events, facts, drift, worst window) as one HTML file."""
    from ..render.common import stderr_console
    from ..render.html import session_report

    with open_store(config, db, models=model) as ws:
        page = session_report(ws.store, ws.resolve(session), ws.cfg, models=model or [])
    html.parent.mkdir(parents=True, exist_ok=True)
    html.write_text(page, encoding="utf-8")
    stderr_console().print(f"wrote {html}")
