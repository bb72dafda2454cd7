"""Applied edits: which of the edits a run's actions show took effect.

``run_edits`` lists every action that changed files as its command shows it; a command that
failed before it wrote changed nothing. ``applied_edits`` tells, per edit action, which of its
edits applied and why the others did not: a Python script that does not parse (a heredoc cut at
end of file, a ``python -c`` that died with a SyntaxError) or raised before its first write, a
bash syntax error on a line before the edit ran, a ``sed`` that failed, a file tool that refused.
A command whose edit applied before a later part failed keeps it. ``effective_edits`` are the
edits that applied: what ``diverge`` and ``explain`` decide on (an edit that did not apply is
never decisive). ``strip_wrappers`` reads shell commands for ``explain``'s checks too.
"""

from __future__ import annotations

import posixpath
import re

from .actions import shell_segments, shell_tokens, tool_kind
from .display import one_line
from .edits import EditAction, FileEdit, command_lines, run_edits, shell_edits, workdir
from .events import RunEvents

# wrappers that run the rest of the command: ``timeout 60 pytest``, ``poetry run pytest``, ...
_PREFIXES = frozenset({"sudo", "time", "env", "nice", "nohup", "command", "exec", "xvfb-run", "stdbuf", "npx",
                       "bunx", "pnpx", "uvx", "dotenv"})
_RUNNERS = {("poetry", "run"), ("uv", "run"), ("pipenv", "run"), ("pdm", "run"), ("hatch", "run"),
            ("bundle", "exec"), ("pnpm", "exec"), ("yarn", "exec"), ("conda", "run"), ("rye", "run")}
_TIMEOUT_ARG = re.compile(r"[\d.]+[smhd]?|[A-Z]+")  # ``timeout -s KILL 60``


def strip_wrappers(seg: list[str]) -> list[str]:
    """A simple command without env assignments and wrappers (``timeout 60``, ``poetry run``)."""
    i = 0
    while i < len(seg):
        t = seg[i]
        if re.fullmatch(r"[A-Za-z_]\w*=.*", t):
            i += 1
        elif t in _PREFIXES or t == "timeout":  # and their options
            i += 1
            while i < len(seg) and (seg[i].startswith("-") or (t == "timeout" and _TIMEOUT_ARG.fullmatch(seg[i]))):
                i += 1
        elif i + 1 < len(seg) and (t, seg[i + 1]) in _RUNNERS:
            i += 2
        else:
            return seg[i:]
    return []


# --- edits that applied -------------------------------------------------------------------------

_BASH_SYNTAX = re.compile(r"^(?:/bin/)?(?:ba|z)?sh: (?:-c: )?line (\d+): syntax error", re.MULTILINE)
_PY_SYNTAX = re.compile(r'File "([^"]+)", line (\d+)\n(?:.*\n){0,3}?\s*(?:SyntaxError|IndentationError|TabError):')
_TRACEBACK = re.compile(r'Traceback \(most recent call last\):\n\s*File "([^"]+)", line (\d+)')
_WRITE_CALL = re.compile(r"\.write_(?:text|bytes)\(|\.writelines?\(|open\([^)\n]*,\s*(?:mode\s*=\s*)?['\"][wa+]"
                         r"|shutil\.(?:copy\w*|move)\(|os\.(?:replace|rename)\(|\bfileinput\b")
_PYTHONS = re.compile(r"^python[\d.]*$")


def bash_syntax_line(output: str) -> int | None:
    """The line of the command where bash reported a syntax error (the lines before it ran), or None."""
    m = _BASH_SYNTAX.search(output)
    return int(m.group(1)) if m else None


def _python_scripts(cmd: str, created: dict[str, str]) -> list[tuple[str, str]]:
    """(name a traceback gives it, script text) of each Python script a command runs:
    ``<stdin>`` for ``python - <<EOF``, ``<string>`` for ``-c``, the path for a file the run wrote."""
    out: list[tuple[str, str]] = []
    for line, _, body in command_lines(cmd):
        for seg in shell_segments(shell_tokens(line) or []):
            seg = strip_wrappers(seg)
            if not seg or not _PYTHONS.match(posixpath.basename(seg[0])):
                continue
            args = seg[1:]
            if "-c" in args and args.index("-c") + 1 < len(args):
                out.append(("<string>", args[args.index("-c") + 1]))
            elif body is not None and ("-" in args or not [a for a in args if not a.startswith("-")]):
                out.append(("<stdin>", body))
            else:
                f = next((a for a in args if a.endswith(".py")), None)
                hit = next((v for k, v in created.items() if f and (k == f or k.endswith("/" + f.lstrip("./")))), None)
                if f and hit is not None:
                    out.append((f, hit))
    return out


def _unapplied(act: EditAction, created: dict[str, str], roots: tuple[str, ...] = ()
               ) -> tuple[list[FileEdit], str | None]:
    """The edits of a shell action that applied, and why the others did not (None: all did)."""
    ev, res = act.event, act.event.result
    if res is None or tool_kind(ev.tool) != "shell":
        return act.edits, None
    text = res.text
    kept, why = list(act.edits), None
    line = bash_syntax_line(text)
    if line is not None:
        lines = ev.text.replace("\r\n", "\n").split("\n")[:line - 1]
        while lines and re.search(r"(?:&&|\|\||\||\\)\s*$", lines[-1]):
            lines.pop()  # the command continued onto the bad line: it never ran
        ran = {(x.path, x.op) for x in (shell_edits("\n".join(lines), dict(created), workdir(ev), roots)
                                        if lines else [])}
        kept = [x for x in kept if (x.path, x.op) in ran]
        if len(kept) < len(act.edits):
            why = f"bash syntax error at line {line} of the command, before the edit"
    writers = [(name, s) for name, s in _python_scripts(ev.text, created) if _WRITE_CALL.search(s)]
    if len(writers) == 1 and any(x.via == "script" for x in kept):
        (name, script), failed_at, why_py = writers[0], None, ""
        if (m := _PY_SYNTAX.search(text)) and _same_script(m.group(1), name):
            cut = "the heredoc was cut at end of file and " if "here-document" in text and "end-of-file" in text else ""
            failed_at, why_py = 0, f"{cut}the Python script that was to write does not parse: nothing ran"
        elif (m := _TRACEBACK.search(text)) and _same_script(m.group(1), name):
            failed_at = int(m.group(2))
            why_py = f"the Python script raised at its line {failed_at}, before its first write"
        if failed_at is not None:
            first_write = min((n for n, ln in enumerate(script.split("\n"), 1) if _WRITE_CALL.search(ln)), default=0)
            if failed_at == 0 or first_write > failed_at:
                kept = [x for x in kept if x.via != "script"]
                why = why_py
    for m in re.finditer(r"^sed: (?:-e expression #\d+, char \d+: .*|can't read (.+?): .*)$", text, re.MULTILINE):
        sed = [x for x in kept if x.via == "sed" and (m.group(1) is None or x.path.endswith(m.group(1).lstrip("./")))]
        if sed and (m.group(1) is not None or len({x.path for x in sed}) == 1):
            kept = [x for x in kept if x not in sed]
            why = "sed failed: " + one_line(m.group(0), 100)
    return kept, why


def _same_script(frame: str, name: str) -> bool:
    """Whether a traceback's file (``<stdin>``, a path) is the script ``name``."""
    return frame == name or (not frame.startswith("<") and frame.endswith(posixpath.basename(name)))


def applied_edits(rev: RunEvents) -> list[tuple[EditAction, EditAction | None, str | None]]:
    """Each edit action of ``run_edits``: (the action, the part of it that applied or None, why
    the rest did not or None)."""
    out: list[tuple[EditAction, EditAction | None, str | None]] = []
    created: dict[str, str] = {}
    for act in run_edits(rev):
        if tool_kind(act.event.tool) != "shell" and act.event.result is not None and \
                _EDIT_REFUSED.search(act.event.result.text[:400]):
            out.append((act, None, "the tool reported that the edit failed"))
            continue
        # a script the command itself writes first (``cat > p.py <<EOF ... && python p.py``)
        mine = {x.path: x.new for x in act.edits if x.op == "create" and x.new is not None}
        kept, why = _unapplied(act, {**created, **mine}, rev.roots)
        for x in kept:
            if x.op == "create" and x.new is not None:
                created[x.path] = x.new
        out.append((act, EditAction(act.event, kept) if kept else None, why))
    return out


_EDIT_REFUSED = re.compile(r"<tool_use_error>|\bcould not find\b.*\btext\b|old_string not found|String to replace "
                           r"not found|Found \d+ matches of the string", re.IGNORECASE)


def effective_edits(rev: RunEvents) -> list[EditAction]:
    """``run_edits`` without the edits that never applied (see ``applied_edits``)."""
    return [done for _, done, _ in applied_edits(rev) if done is not None]
