"""What every command module shares: the Typer app, the common options, the error boundary, and
``parse_params`` for ``--param``. The commands call the Python API (``api/``: the config, the
store, the --model check, a SESSION argument resolved or a log path ingested on the fly) and
print what it returns.

Domain errors become exit codes here (``handle_errors``) and nowhere else. Heavy modules
(torch, sentence-transformers, tiktoken, numpy) are imported inside the commands that need them.
"""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from ..errors import CtxfError, ExitCode
from ..version import __version__
from .usage import CtxfGroup

app = typer.Typer(
    cls=CtxfGroup,  # one-line usage errors; help that names values, not Python types
    name="ctxf",
    help="Offline forensics for recorded LLM session logs: what the model saw, what it lost, and when.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion [bash|zsh|fish|powershell]
    rich_markup_mode=None,
    pretty_exceptions_enable=False,
)
config_app = typer.Typer(help="Check or show the effective configuration.", no_args_is_help=True)
app.add_typer(config_app, name="config")



def given_path(raw: str) -> Path:
    """A PATH argument or option as typed: an empty one is a usage error (``Path("")`` is the
    current folder, so ``ctxf ingest ""`` would read whatever lies where the user stands)."""
    if isinstance(raw, Path):
        return raw
    if raw == "":
        raise typer.BadParameter("an empty path; name the file or folder")
    return Path(raw)


DbOpt = Annotated[Optional[Path], typer.Option("--db", metavar="PATH", parser=given_path, help="SQLite store (default: "
    "$CTXF_DB, else storage.path from the config, else ./forensics_data/sessions.db when the working folder holds one, "
    "else the user-level store; `ctxf config show` says which).")]
ConfigOpt = Annotated[
    Optional[Path],
    typer.Option("--config", metavar="FILE", parser=given_path,
                 help="Config file (default: $CTXF_CONFIG, then ./forensics_config.yaml)."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON to stdout instead of tables.")]
SessionArg = Annotated[str, typer.Argument(metavar="SESSION", help="Session id, unique id prefix, or log file path.")]
FormatOpt = Annotated[Optional[str],
                      typer.Option("--format", "-f", help="Force the format of a file argument (see `ctxf formats`).")]
PolicyOpt = Annotated[Optional[str], typer.Option(
    "--policy", "-p", help="Overflow policy, one of {policies} (default: the model's).")]
ParamOpt = Annotated[Optional[list[str]], typer.Option(
    "--param", metavar="KEY=VALUE", help="A parameter of the policy (repeatable), e.g. --param keep=3.")]

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


def check_output(path: Path | None, option: str) -> None:
    """Raise ``UsageError`` (exit 2) when ``path``, the file of ``option`` (``--html``,
    ``--junit``, ``--plot``), cannot be written: checked before any work, so a long run does not
    end in an error for a typo. Missing folders are fine when they can be created (the writers
    create them); a probe file, removed at once, tells a writable folder from one that is not
    (permission bits do not stop root, a read-only mount or ``/proc`` do)."""
    if path is None:
        return
    import tempfile

    from ..errors import UsageError

    p = Path(path)
    hint = f"give {option} a file in a folder you can write, e.g. {option} ./{p.name or 'out'}"
    if p.is_dir():
        raise UsageError("is a folder, not a file", where=f"{option} {p}",
                         hint=f"give a file name, e.g. {option} {p / ('report' + (p.suffix or '.html'))}")
    if p.exists():
        if not os.access(p, os.W_OK):
            raise UsageError("cannot write this file (permission denied)", where=f"{option} {p}", hint=hint)
        return  # a file to replace, or a device or pipe to write to
    folder = p.absolute().parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent  # the nearest folder that exists: the missing ones are created in it
    if not folder.is_dir():
        raise UsageError(f"{folder} is a file, not a folder", where=f"{option} {p}", hint=hint)
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".ctxf-probe-")
    except OSError as e:
        raise UsageError(f"cannot write in {folder}: {e.strerror or e}", where=f"{option} {p}", hint=hint) from None
    os.close(fd)
    os.unlink(probe)


def parse_params(items: list[str] | None) -> dict[str, Any]:
    """``key=value`` pairs; values are parsed as YAML scalars/lists (``keep=3``, ``exclude_tools=[a,b]``)."""
    import yaml

    from ..config.strict_yaml import load_strict
    from ..errors import UsageError

    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param {item!r} is not key=value", hint="e.g. --param keep=3")
        try:
            out[key.strip()] = load_strict(value)
        except yaml.YAMLError as e:
            raise UsageError(f"--param {item!r}: invalid YAML value: {getattr(e, 'problem', None) or e}",
                             hint="e.g. --param keep=3 or --param exclude_tools=[a,b]") from None
    return out


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(int(ExitCode.INTERRUPTED))


# Command groups that live in their own modules register themselves on `app` when imported.
