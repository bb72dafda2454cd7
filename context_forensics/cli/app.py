"""The ``ctxf`` command line: parses arguments, calls the core, hands results to render.py.

Domain errors become exit codes here and nowhere else. Heavy modules (torch,
sentence-transformers, tiktoken) are imported inside the commands that need them.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from .. import __version__
from ..errors import CtxfError, ExitCode

app = typer.Typer(
    name="ctxf",
    help="Offline forensics for recorded LLM session logs: what the model saw, what it lost, and when.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Check or show the effective configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")

DbOpt = Annotated[Optional[Path], typer.Option("--db", help="SQLite store (default: storage.path from the config).")]
ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", help="Config file (default: $CTXF_CONFIG, then ./forensics_config.yaml)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of tables.")]
SessionArg = Annotated[str, typer.Argument(help="Session id, unique id prefix, or log file path.")]
FormatOpt = Annotated[Optional[str], typer.Option("--format", "-f", help="Force the format of a file argument.")]
PolicyOpt = Annotated[Optional[str], typer.Option("--policy", "-p", help="Overflow policy (default: the model's).")]
ParamOpt = Annotated[Optional[list[str]], typer.Option("--param", help="Policy parameter key=value (repeatable).")]

_debug = bool(os.environ.get("CTXF_DEBUG"))


def _version(value: bool) -> None:
    if value:
        typer.echo(f"ctxf {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    debug: Annotated[bool, typer.Option("--debug", help="Show Python tracebacks on errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    global _debug
    _debug = _debug or debug


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn domain errors into a message on stderr and their documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from ..render.common import safe, stderr_console

        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except CtxfError as e:
            if _debug:
                raise
            stderr_console().print(safe(f"error: {e}"))
            raise typer.Exit(int(e.exit_code)) from None
        except KeyboardInterrupt:
            stderr_console().print("interrupted")
            raise typer.Exit(int(ExitCode.INTERRUPTED)) from None
        except BrokenPipeError:
            raise typer.Exit(int(ExitCode.OK)) from None
        except Exception as e:  # a bug: say so plainly, keep the traceback for --debug
            if _debug:
                raise
            stderr_console().print(
                safe(f"internal error: {type(e).__name__}: {e}\n  rerun with --debug for the traceback")
            )
            raise typer.Exit(int(ExitCode.ERROR)) from None

    return wrapper


def _open(config: Path | None, db: Path | None):
    from ..config.settings import load_config
    from ..store.db import Store

    cfg = load_config(config)
    return cfg, Store.open(db or cfg.storage.path, max_sessions=cfg.storage.max_sessions)


# ---------------------------------------------------------------- ingest


@app.command()
@handle_errors
def ingest(
    paths: Annotated[list[Path], typer.Argument(help="Log files or folders.", show_default=False)],
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="Force a format (see `ctxf formats`).")] = None,
    recursive: Annotated[bool, typer.Option("--recursive", "-r", help="Walk sub-folders.")] = False,
    task: Annotated[Optional[str], typer.Option("--task", help="Set the task key of every ingested session.")] = None,
    outcome: Annotated[
        Optional[str], typer.Option("--outcome", help="Set the outcome: success, failure or unknown.")
    ] = None,
    table: Annotated[Optional[str], typer.Option("--table", help="Table to read from an SQLite file.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Re-read files already ingested.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="List every warning and skipped record.")] = False,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Load session logs of any supported format into the store."""
    from ..store.ingest import ingest_paths
    from ..render.common import ingest_problems, ingest_summary, print_json, stderr_console, stdout_console

    cfg, store = _open(config, db)
    err = stderr_console()
    with store:
        with _progress(err) as progress:
            report = ingest_paths(
                store, paths, fmt=fmt, recursive=recursive, task=task, outcome=outcome, force=force,
                options={"table": table} if table else None, progress=progress,
            )
    data = report.to_dict()
    ingest_problems(err, data, verbose=verbose)
    if json_out:
        print_json(data)
    else:
        ingest_summary(stdout_console(), data)
    raise typer.Exit(int(report.exit_code))


class _progress:
    """A rich progress bar on stderr, shown only on a terminal."""

    def __init__(self, console):
        self.console = console
        self.bar = None
        self.task = None

    def __enter__(self):
        if self.console.is_terminal:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

            self.bar = Progress(TextColumn("ingest"), BarColumn(), MofNCompleteColumn(),
                                TextColumn("{task.description}"), console=self.console, transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=None)
        return self.update

    def update(self, path: str, done: int, total: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done, total=total, description=Path(path).name if path else "")

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()


# ---------------------------------------------------------------- browsing


@app.command()
@handle_errors
def sessions(
    fmt: Annotated[Optional[str], typer.Option("--format", "-f", help="Only this format.")] = None,
    task: Annotated[Optional[str], typer.Option("--task", help="Only this task key.")] = None,
    outcome: Annotated[Optional[str], typer.Option("--outcome", help="Only this outcome.")] = None,
    json_out: JsonOpt = False,
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """List the sessions in the store."""
    from ..render.common import print_json, sessions_table, stdout_console

    _, store = _open(config, db)
    with store:
        rows = store.sessions(fmt=fmt, task=task, outcome=outcome)
    if json_out:
        print_json([_session_json(r) for r in rows])
    else:
        sessions_table(stdout_console(), rows)


def _session_json(r: dict) -> dict:
    return {
        "id": r["id"],
        "format": r["format"],
        "source": r["source"],
        "title": r["title"],
        "model": r["model"],
        "models": r["models"],
        "task": r["task"],
        "outcome": r["outcome"],
        "started_at": r["started_at"],
        "parent_id": r["parent_id"],
        "external_id": r["external_id"],
        "message_count": r["message_count"],
        "step_count": r["step_count"],
        "usage_count": r["usage_count"],
        "content_hash": r["content_hash"],
        "metadata": r["metadata"],
    }


def _message_json(m) -> dict:
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
    from ..store.ingest import resolve_session
    from ..render.common import print_json, show_session, stdout_console

    _, store = _open(config, db)
    with store:
        sid = resolve_session(store, session, fmt=fmt)
        row = store.session(sid)
        stored = store.messages(sid)
        msgs = [_message_json(m) for m in stored]
    from ..replay.engine import message_steps

    for m, (makes, joins) in zip(msgs, message_steps(stored)):
        m["step"], m["joins_step"] = makes, joins  # the seq ↔ step link to `replay --at`
    if json_out:
        print_json({"version": 1, "session": _session_json(row), "messages": msgs})
    else:
        show_session(stdout_console(), row, msgs)


@app.command()
@handle_errors
def rm(
    session_refs: Annotated[list[str], typer.Argument(help="Session ids or unique prefixes.", show_default=False)],
    db: DbOpt = None,
    config: ConfigOpt = None,
) -> None:
    """Remove sessions (and their messages) from the store; re-ingesting their files restores them."""
    from ..store.ingest import resolve_session
    from ..render.common import stderr_console

    _, store = _open(config, db)
    with store:
        ids = list(dict.fromkeys(resolve_session(store, ref) for ref in session_refs))
        with store.transaction():
            # The file records that produced them go too, or a re-ingest would say "unchanged".
            removed = store.delete_sessions(ids)
    stderr_console().print(f"removed {removed} session(s)")


@app.command()
@handle_errors
def formats(json_out: JsonOpt = False) -> None:
    """List the log formats ctxf can ingest."""
    from ..importers import registry
    from ..render.common import formats_table, print_json, stdout_console

    rows = [
        {"name": i.name, "description": i.description, "extensions": list(i.extensions),
         "directory": i.handles_directories}
        for i in registry().values()
    ]
    if json_out:
        print_json(rows)
    else:
        formats_table(stdout_console(), rows)


# ---------------------------------------------------------------- replay


def check_models(names: list[str] | str | None, cfg: Any) -> None:
    """Exit 2 with the closest known names for a --model the table and the config cannot place."""
    from ..config.models import resolve_model

    for name in [names] if isinstance(names, str) else names or []:
        resolve_model(name, cfg)


def _parse_params(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values are parsed as YAML scalars/lists (``keep=3``, ``exclude_tools=[a,b]``)."""
    import yaml

    from ..errors import UsageError

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {item!r} is not key=value", hint="e.g. --param keep=3")
        out[key.strip()] = yaml.safe_load(value)
    return out


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
    from ..store.ingest import resolve_session
    from ..render.common import print_json, replay_view, stderr_console, stdout_console, window_view
    from ..replay.engine import REPLAY_VERSION, replay_session, window_at

    cfg, store = _open(config, db)
    params = _parse_params(param)
    alert = cfg.analysis_thresholds.min_context_utilization_alert
    check_models(model, cfg)  # a misspelled --model fails before anything is ingested
    with store:
        sid = resolve_session(store, session, fmt=fmt)
        row = store.session(sid)
        models: list[str | None] = list(model) if model else [None]  # None: the recorded model (or assumed)
        if not model and policy is None:
            policy = "recorded"  # ground truth first: what the log says happened
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
        print_json({"version": REPLAY_VERSION, "session": _session_json(row), "replays": reps})
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
    from ..render.common import models_lookup, models_table, print_json, stdout_console

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


# ---------------------------------------------------------------- config


@config_app.command("check")
@handle_errors
def config_check(config: ConfigOpt = None) -> None:
    """Validate the config file; exit 2 with the key and the fix if it is invalid."""
    from ..config.settings import load_config
    from ..render.common import stdout_console

    cfg = load_config(config)
    stdout_console().print(f"ok: {cfg.source} ({len(cfg.model_mappings)} model mapping(s))", highlight=False)


@config_app.command("show")
@handle_errors
def config_show(config: ConfigOpt = None, json_out: JsonOpt = False) -> None:
    """Print the effective configuration (file merged over built-in defaults)."""
    from ..config.settings import load_config
    from ..render.common import config_view, print_json, stdout_console

    from ..config.models import effective_mappings

    cfg = load_config(config)
    data = {**cfg.to_dict(), "model_mappings": effective_mappings(cfg)}  # every figure, wherever it comes from
    if json_out:
        print_json({"version": 1, "source": cfg.source, **data})
    else:
        config_view(stdout_console(), data, cfg.source)


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(int(ExitCode.INTERRUPTED))


# Command groups that live in their own modules register themselves on `app` when imported.
from . import audit as cli_audit
from . import diverge as cli_diverge
from . import drift as cli_drift
from . import facts as cli_facts
