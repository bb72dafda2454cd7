"""How ``ctxf`` talks about its own arguments: one-line usage errors and help without Python types.

Click prints a usage error as a box of four lines ("Usage: …", "Try …", a blank, "Error: …");
ctxf prints one: ``ctxf replay: no such option --foo (try `ctxf replay --help`)``, exit 2.
Typer 0.29 prints each parameter's Python type beside it in ``--help`` (``<list[str]>``,
``<int range>``, ``session <str>``); ctxf's help names the value instead (``--model MODEL``,
``--workers N``, ``SESSION``). ``CtxfGroup`` is the root group's class: it does both for every
command registered on the app, so a new command needs nothing to get them.

Help that lists names from a registry (``--policy``'s policies, ``--fail-on``'s rules) holds a
placeholder, filled only when that help is printed: the policy registry imports numpy, and
``ctxf --help`` must stay instant.
"""

from __future__ import annotations

from typing import Any, Callable

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption


def _kinds(e: BaseException) -> set[str]:
    """The names of an exception's click classes. Click's usage errors are known by name: typer >=
    0.26 raises its own (private) copy of click's, an older typer click's own, and neither is
    public; ctxf's own ``errors.UsageError`` shares the name, not the module."""
    return {c.__name__ for c in type(e).__mro__ if c.__module__.split(".")[0] in ("typer", "click")}


def _policy_names() -> str:
    from ..analysis.replay.policies import policies

    return ", ".join(policies())


def _rule_names() -> str:
    from ..config.audit_rules import RULE_PARAMS

    return ", ".join(RULE_PARAMS)


# Placeholders a help text may hold, and what fills them (when the help is printed).
HELP_NAMES: dict[str, Callable[[], str]] = {"{policies}": _policy_names, "{rules}": _rule_names}


def _metavar(param: TyperOption) -> str:
    """The value's name for an option given none: its long flag's (``--task`` takes TASK)."""
    flag = max(param.opts, key=len)
    return flag.lstrip("-").upper().replace("-", "_")


class CtxfCommand(TyperCommand):
    """A command whose help names values, not Python types, and fills registry placeholders."""

    def format_help(self, ctx: Any, formatter: Any) -> None:
        for param in self.params:
            help_text = getattr(param, "help", None)
            if help_text:
                for mark, names in HELP_NAMES.items():
                    if mark in help_text:
                        help_text = help_text.replace(mark, names())
                param.help = help_text  # type: ignore[attr-defined]
        super().format_help(ctx, formatter)

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        # typer writes a required argument with a metavar as "{SESSION}": the usage line says SESSION
        import re

        return [re.sub(r"^\{(.*)\}(\.\.\.)?$", r"\1\2", p) for p in super().collect_usage_pieces(ctx)]

    def make_context(self, info_name: str | None, args: list[str], parent: Any = None, **extra: Any) -> Any:
        # Some parse errors (an option missing its value) come without the command's context.
        return _one_line(lambda: super(CtxfCommand, self).make_context(info_name, args, parent, **extra),
                         lambda: " ".join(filter(None, [parent.command_path if parent else "", info_name or ""])))

    def format_options(self, ctx: Any, formatter: Any) -> None:
        args, opts = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if isinstance(param, TyperArgument):  # "SESSION", not "SESSION <str>"
                name = param.metavar or (param.name or "").upper()
                args.append((name + ("..." if param.nargs != 1 else ""), record[1]))
            else:
                opts.append(record)
        if args:
            with formatter.section("Arguments"):
                formatter.write_dl(args)
        if opts:
            with formatter.section("Options"):
                formatter.write_dl(opts)


def plain(cmd: Any) -> Any:
    """Give ``cmd`` (and, for a group, its commands) value names in place of Python types."""
    if isinstance(cmd, TyperGroup):
        for sub in cmd.commands.values():
            plain(sub)
    elif type(cmd) is TyperCommand:
        cmd.__class__ = CtxfCommand  # same object, help formatted as above
    for param in cmd.params:
        if isinstance(param, TyperArgument) and param.metavar is None:
            param.metavar = (param.name or "").upper()
        elif isinstance(param, TyperOption) and not param.is_flag and param.metavar is None:
            param.metavar = _metavar(param)
    return cmd


def _sentence(text: str) -> str:
    """Click's message as part of one line: no capital first word, no final period, no line breaks."""
    text = " ".join(text.split())
    if len(text) > 1 and text[0].isupper() and text[1].islower():
        text = text[0].lower() + text[1:]
    return text.rstrip(".")


def one_line(e: Any, path: str | None = None) -> str:
    """``ctxf CMD: what is wrong (try `ctxf CMD --help`)`` for a click usage error; ``path``: the
    command's, when the error does not carry its context."""
    if path is None:
        path = e.ctx.command_path if e.ctx is not None else "ctxf"
    if "NoSuchOption" in _kinds(e):
        msg = f"no such option {e.option_name}"
        if e.possibilities:
            msg += f", did you mean {' or '.join(e.possibilities)}?"
    else:
        msg = _sentence(e.format_message()).replace(". Did you mean", ", did you mean")
    return f"{path}: {msg} (try `{path} --help`)"


def _one_line(make: Callable[[], Any], path: Callable[[], str]) -> Any:
    """``make()``, its usage errors (not "no arguments: here is the help") shown as one line on
    stderr: the error itself is raised on, its ``show`` replaced (click shows it, then exits with
    its code)."""
    try:
        return make()
    except Exception as e:
        kinds = _kinds(e)
        if "UsageError" not in kinds or "NoArgsIsHelpError" in kinds or hasattr(e, "ctxf_line"):
            raise
        line = one_line(e, None if getattr(e, "ctx", None) is not None else path())  # click's UsageError, by name
        e.ctxf_line = line  # type: ignore[attr-defined]
        e.show = lambda file=None: typer.echo(line, file=file, err=True)  # type: ignore[attr-defined]
        raise


class CtxfGroup(TyperGroup):
    """The root group: commands with plain help, usage errors in one line."""

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        cmd = super().get_command(ctx, cmd_name)
        return plain(cmd) if cmd is not None else None

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        return _one_line(lambda: super(CtxfGroup, self).make_context(*args, **kwargs), lambda: "ctxf")

    def invoke(self, ctx: Any) -> Any:
        return _one_line(lambda: super(CtxfGroup, self).invoke(ctx), lambda: ctx.command_path)


__all__ = ["CtxfCommand", "CtxfGroup", "HELP_NAMES", "one_line", "plain"]
