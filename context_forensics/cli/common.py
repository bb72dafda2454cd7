"""What every command module shares: the Typer app, the common options, the error boundary, and
the few lines every command starts with (``open_store``: the config, the store, the --model
check; ``Workspace.session``: a SESSION argument resolved, a log path ingested on the fly).

Domain errors become exit codes here (``handle_errors``) and nowhere else. Heavy modules
(torch, sentence-transformers, tiktoken, numpy) are imported inside the commands that need them.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Optional

import typer

from ..version import __version__
from ..errors import CtxfError, ExitCode

if TYPE_CHECKING:  # pragma: no cover - the store and the config load inside the commands
    from ..config.settings import Config
    from ..store.db import Store

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


class Workspace:
    """What a command reads from: the effective config and the open store, closed on exit.

    ``resolve`` and ``session`` turn a SESSION argument (an id, a unique id prefix, or a log
    file path, ingested on the fly) into the session it names.
    """

    def __init__(self, cfg: Config, store: Store) -> None:
        self.cfg = cfg
        self.store = store

    def __enter__(self) -> Workspace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.close()

    def resolve(self, ref: str, fmt: str | None = None) -> str:
        """The id of the session ``ref`` names (``fmt`` forces the format of a file to ingest)."""
        from ..store.ingest import resolve_session

        return resolve_session(self.store, ref, fmt=fmt)

    def session(self, ref: str, fmt: str | None = None) -> tuple[str, dict[str, Any]]:
        """The id and the stored row of the session ``ref`` names."""
        sid = self.resolve(ref, fmt)
        return sid, self.store.session(sid)


def open_store(config: Path | None, db: Path | None, *, models: list[str] | str | None = None) -> Workspace:
    """Load the config, open its store (or ``--db``), and check each ``--model`` in ``models``.

    A misspelled model exits 2 with the closest known names before anything is ingested.
    Use it as ``with open_store(config, db, models=model) as ws:``.
    """
    from ..config.settings import load_config
    from ..store.db import Store

    cfg = load_config(config)
    ws = Workspace(cfg, Store.open(db or cfg.storage.path, max_sessions=cfg.storage.max_sessions))
    try:
        check_models(models, cfg)
    except BaseException:
        ws.store.close()
        raise
    return ws


def recorded_unless(model: list[str] | str | None, policy: str | None) -> str | None:
    """The policy a replay-based command runs: without ``--model`` or ``--policy``, ``recorded``
    (ground truth first: what the log says happened), else the one given (None: the model's)."""
    return "recorded" if not model and policy is None else policy


def session_json(r: dict[str, Any]) -> dict[str, Any]:
    """A session row as the ``session`` object of every command's ``--json``."""
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


def check_models(names: list[str] | str | None, cfg: Config) -> None:
    """Exit 2 with the closest known names for a --model the table and the config cannot place."""
    from ..config.models import resolve_model

    for name in [names] if isinstance(names, str) else names or []:
        resolve_model(name, cfg)


def parse_params(items: list[str] | None) -> dict[str, Any]:
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


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(int(ExitCode.INTERRUPTED))


# Command groups that live in their own modules register themselves on `app` when imported.
