"""`ctxf ingest`, `sessions`, `show`, `rm`, `formats`: getting logs into the store and browsing it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ..api.checks import on_disk
from ..api.workspace import open_store, session_json
from .common import ConfigOpt, DbOpt, FormatOpt, JsonOpt, SessionArg, app, check_output, given_path, handle_errors

if TYPE_CHECKING:  # pragma: no cover
    from ..store.db import StoredMessage


# ---------------------------------------------------------------- ingest


@app.command()
@handle_errors
def ingest(
    # readable=False: an unreadable file fails on its own in the ingest (exit 1), the others are
    # read; click's own check would reject the whole command for it.
    paths: Annotated[Optional[list[Path]], typer.Argument(
        help="Log files or folders (none with --discover).", show_default=False, readable=False,
        parser=given_path)] = None,
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="Force a format (see `ctxf formats`).")] = None,
    recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Walk sub-folders.")] = False,
    task: Annotated[Optional[str], typer.Option("--task", help="Set the task key of every ingested session.")] = None,
    outcome: Annotated[
        Optional[str], typer.Option("--outcome", help="Set the outcome: success, failure or unknown.")
    ] = None,
    table: Annotated[Optional[str], typer.Option("--table", help="Table to read from an SQLite file.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-read files already ingested.")] = False,
    no_redact: Annotated[bool, typer.Option(
        "--no-redact", help="Store text as is: do not replace secrets (API keys, tokens, passwords).")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every warning and skipped record.")] = False,
    discover: Annotated[bool, typer.Option(
        "--discover", help="Find the logs of every supported agent in its default places, and ingest them.")] = False,
    agent: Annotated[Optional[list[str]], typer.Option(
        "--agent", help="With --discover: only this agent (repeatable; e.g. claude-code, codex, cline).")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="With --discover: list what is found; read nothing, store nothing.")] = False,
    executor: Annotated[Optional[str], typer.Option(
        "--executor", "-x", metavar="NAME", help="Where the files are read: serial (this process; the default), "
        "process (worker processes) or ray (Ray tasks; the ray extra). This process writes them, in order.",
        show_default=False)] = None,
    workers: Annotated[Optional[int], typer.Option(
        "--workers", "-w", min=1, metavar="N", help="Worker processes (process; --workers N alone means "
        "--executor process), or the CPUs of the local Ray (ray).", show_default=False)] = None,
    ray_address: Annotated[Optional[str], typer.Option(
        "--ray-address", metavar="ADDR", help="Join the Ray cluster at ADDR (host:port, or auto) instead of "
        "starting a local Ray; with --executor ray.")] = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Load session logs of any supported format into the store."""
    from .. import api
    from ..errors import UsageError
    from ..render.common import print_json, stderr_console, stdout_console
    from ..render.discover import discovery_table
    from ..render.ingest import ingest_problems, ingest_summary
    from ..render.progress import ProgressBar

    if not paths and not discover:
        raise UsageError("nothing to ingest", hint="give log files or folders, or --discover to find them")
    if dry_run:
        if not discover:
            raise UsageError("--dry-run lists what --discover finds", hint="add --discover")
        if paths:
            raise UsageError("--dry-run lists what --discover finds, not the paths given",
                             hint="drop the paths, or --dry-run")
        found = api.discover(agent).to_dict()  # no store opened: nothing is created
        if json_out:
            print_json(found)
        else:
            discovery_table(stdout_console(), found, verbose=verbose, dry_run=True)
        return
    err = stderr_console()
    with ProgressBar(err, "ingest", detail=True, command="ctxf ingest", unit="files") as bar:
        result = api.ingest(paths or [], fmt=fmt, recursive=recursive, task=task, outcome=outcome, table=table,
                            force=force, db=db, config=config, progress=bar.file,
                            redact=False if no_redact else None, discover=discover, agents=agent,
                            executor=executor, workers=workers, ray_address=ray_address)
    data = result.to_dict()
    retries = (data.get("executor") or {}).get("retries", 0)
    if retries:
        err.print(f"{retries} job(s) ran again after their worker died")
    ingest_problems(err, data, verbose=verbose)
    if json_out:
        print_json(data)
    else:
        out = stdout_console()
        if "discovered" in data:
            discovery_table(out, data["discovered"], verbose=verbose)
        ingest_summary(out, data)
    raise typer.Exit(result.exit_code)


# ---------------------------------------------------------------- browsing


@app.command()
@handle_errors
def sessions(
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="Only this format.")] = None,
    task: Annotated[Optional[str], typer.Option("--task", help="Only this task key.")] = None,
    outcome: Annotated[Optional[str], typer.Option("--outcome", help="Only this outcome.")] = None,
    agent: Annotated[Optional[str], typer.Option(
        "--agent", help="Only sessions of this agent (claude-code, codex, cline, roo, gemini-cli ...).")] = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """List the sessions in the store."""
    from ..render.common import print_json, stdout_console
    from ..render.sessions import sessions_table

    with open_store(db, config=config, create=False) as ws:
        rows = ws.sessions(fmt=fmt, task=task, outcome=outcome, agent=agent)
    if json_out:
        print_json({"version": 1, "sessions": rows})
    else:
        sessions_table(stdout_console(), rows)


def _message_json(m: StoredMessage) -> dict[str, Any]:
    msg = m.message
    return {
        "seq": m.seq,
        "role": msg.role,
        "kind": msg.kind,
        "name": msg.name,
        "text": msg.text,
        "tool_calls": [c.to_dict() for c in msg.tool_calls],
        "tool_call_id": msg.tool_call_id,
        "parts": list(msg.parts),
        "usage": msg.usage.to_dict() if msg.usage else None,
        "model": msg.model,
        "timestamp": msg.timestamp,
        "hash": m.hash,
        "meta": msg.meta,
    }


@app.command()
@handle_errors
def show(
    session: SessionArg,
    fmt: FormatOpt = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Show the messages of one session."""
    from ..render.common import print_json, stdout_console
    from ..render.sessions import show_session

    with open_store(db, config=config, create=on_disk(session)) as ws:
        sid, row = ws.session(session, fmt)
        stored = ws.store.messages(sid)
        msgs = [_message_json(m) for m in stored]
    from ..analysis.replay import message_steps

    for m, (makes, joins) in zip(msgs, message_steps(stored)):
        m["step"], m["joins_step"] = makes, joins  # the seq ↔ step link to `replay --at`
    if json_out:
        print_json({"version": 1, "session": session_json(row), "messages": msgs})
    else:
        show_session(stdout_console(), row, msgs)


@app.command()
@handle_errors
def rm(
    session_refs: Annotated[list[str], typer.Argument(metavar="SESSION",
                                                      help="Session ids or unique prefixes.", show_default=False)],
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Remove sessions (and their messages) from the store; re-ingesting their files restores them."""
    from ..render.common import print_json, stderr_console

    with open_store(db, config=config) as ws:
        ids = list(dict.fromkeys(ws.resolve(ref) for ref in session_refs))
        with ws.store.transaction():
            # The file records that produced them go too, or a re-ingest would say "unchanged".
            removed = ws.store.delete_sessions(ids)
    if json_out:
        print_json({"version": 1, "removed": ids, "count": removed})
    else:
        stderr_console().print(f"removed {removed} session(s)")


@app.command()
@handle_errors
def formats(
    json_out: JsonOpt = False,
    db: Annotated[Optional[Path], typer.Option(
        "--db", metavar="PATH", help="A store: also count its sessions of each format.", parser=given_path)] = None,
    config: ConfigOpt = None,
) -> None:
    """List the log formats ctxf can ingest."""
    from collections import Counter

    from ..importers import registry
    from ..render.common import print_json, stdout_console
    from ..render.ingest import formats_table

    rows = [
        {"name": i.name, "description": i.description, "extensions": list(i.extensions),
         "directory": i.handles_directories}
        for i in registry().values()
    ]
    if db is not None:
        with open_store(db, config=config, create=False) as ws:  # no store there: exit 2, none created
            stored = Counter(r["format"] for r in ws.sessions())
        for r in rows:
            r["sessions"] = stored.get(r["name"], 0)
    if json_out:
        print_json({"version": 1, "formats": rows})
    else:
        formats_table(stdout_console(), rows)


@app.command()
@handle_errors
def export(
    session: SessionArg,
    to: Annotated[str, typer.Option(
        "--to", metavar="FORMAT", help="atif (an ATIF-v1.8 trajectory, Harbor RFC 0001), openai (a chat-completions "
        "request: model and messages with tool calls; no usage) or jsonl (ctxf's own lossless form).")] = "atif",
    output: Annotated[Optional[Path], typer.Option(
        "--output", "-o", metavar="FILE", help="The file to write (0600; replaced if it exists, as `ctxf view -o` "
        "does). Default: standard output.", parser=given_path)] = None,
    fmt: FormatOpt = None,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Write a stored session out: ATIF, an OpenAI messages list, or ctxf's own JSONL.

    What the store holds is written: its text was redacted at ingest, so the export is too.
    `ctxf ingest` reads each export back (openai: the messages and tool calls, not the usage).
    """
    from .. import api
    from ..render.common import safe, stderr_console

    check_output(output, "-o")
    result = api.export(session, to=to, fmt=fmt, db=db, config=config)
    if output is None:
        sys.stdout.write(result.text)
        return
    from ..store.files import write_private_text

    write_private_text(output, result.text)
    stderr_console().print(safe(f"{output} ({result.format}, {result.messages:,} messages of session "
                                f"{result.session})"))
