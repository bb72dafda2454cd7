"""Edits: the changes a run's actions made to files, as far as the log shows them.

Every agent's file tools show their change (``_editor_edits``): editor commands (``str_replace``,
``create``, ``insert``, ``undo_edit``), Claude Code's ``Edit`` / ``MultiEdit`` / ``Write``
(``NotebookEdit``: changed), Pi's ``edit`` / ``write``, Cline's ``replace_in_file`` (its SEARCH/REPLACE
``diff``) / ``write_to_file``, Gemini CLI's ``replace`` / ``write_file``, Copilot CLI's ``edit`` /
``create``, Codex's ``apply_patch`` (``edit_formats``), Aider's edit blocks. So do some shell
commands (``shell_edits``): a ``sed -i`` substitution (GNU or BSD ``-i ''``), a heredoc write,
``apply_patch <<EOF``, ``rm``, ``git checkout``/``restore`` of a file, and a Python script (inline,
piped, or a file the run wrote) that makes one literal ``str.replace`` to a file it names
(``script_replace``). Other writes (``sed`` line commands, ``perl -i``, ``mv``, ``echo > f``,
scripts doing more) are ``changed``: the file changed, how is not in the log. A path is made
relative to the run's root (``RunEvents.roots``: the working folder its log records) and is of the
repository when it lies under it. ``run_edits`` lists a run's actions that changed files, in order
(``EditAction``); ``edit_consistency`` checks them against the edit calls the log holds.
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from .actions import (
    PATHISH,
    SHELL_OPERATORS,
    WRITE_TOOLS,
    file_content,
    is_read_only,
    old_new,
    parse_args,
    plain_substitution,
    sed_operands,
    sed_unescape,
    shell_segments,
    shell_tokens,
    shell_workdir,
    tool_kind,
    tool_path,
)
from .display import cap
from .edit_formats import apply_patch_files, search_replace_blocks
from .events import Event, RunEvents, failed
from .normalize import in_repo, normalize_path, unquote
from .patches import Block, added_blocks, blocks_between, parse_patch


@dataclass(frozen=True)
class FileEdit:
    """One change to one file, as far as the log shows it."""

    path: str
    op: str  # create | replace | insert | delete | revert | undo | changed (how is not in the log)
    via: str  # editor | sed | heredoc | script | shell
    old: str | None = None
    new: str | None = None
    line: int | None = None
    in_repo: bool = True

    def blocks(self) -> list[Block] | None:
        """The change blocks of this edit; None when the log does not show the change."""
        if self.op == "create" and self.new is not None:
            return added_blocks(self.path, self.new.rstrip("\n"))
        if self.op == "replace" and self.old is not None and self.new is not None:
            return blocks_between(self.path, self.old, self.new)
        if self.op == "insert" and self.new is not None:
            return added_blocks(self.path, self.new)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.path, "op": self.op, "via": self.via,
                "old": None if self.old is None else cap(self.old, 2000),
                "new": None if self.new is None else cap(self.new, 2000), "line": self.line}


@dataclass
class EditAction:
    """An action that changed files, and its edits."""

    event: Event
    edits: list[FileEdit]

    @property
    def files(self) -> list[str]:
        """The files it changed, sorted."""
        return sorted({e.path for e in self.edits})

    def blocks(self) -> list[Block] | None:
        """The change blocks of its edits (deletes, reverts and undos aside); None when some
        edit's change is not in the log."""
        out: list[Block] = []
        for e in self.edits:
            if e.op in ("delete", "revert", "undo"):
                continue  # compared by ``sig``
            b = e.blocks()
            if b is None:
                return None
            out.extend(b)
        return out

    def sig(self) -> tuple[Any, ...] | None:
        """What another run's edit must equal to be the same edit (None: the change is unknown)."""
        blocks = self.blocks()
        if blocks is None:
            return None
        marks = tuple(sorted((e.op, e.path) for e in self.edits if e.op in ("delete", "revert", "undo")))
        return tuple(sorted(b.sig for b in blocks)) + marks

    def only(self, files: set[str]) -> EditAction | None:
        """The action with only its edits of ``files`` (None when it made none)."""
        kept = [e for e in self.edits if e.path in files]
        return EditAction(self.event, kept) if kept else None


_HEREDOC_OPEN = re.compile(r"<<-?\s*(['\"]?)(\w+)\1")
# a script that writes files: pathlib, open(..., "w"), shutil/os moves
_WRITES = re.compile(r"\.write_(?:text|bytes)\(|\.writelines?\("
                     r"|open\([^)\n]*,\s*(?:mode\s*=\s*)?['\"](?:w|a|r\+|w\+)b?['\"]"
                     r"|shutil\.(?:copy\w*|move)\(|os\.(?:replace|rename)\(|\bfileinput\b")
_QUOTED_PATH = re.compile(r"""(['"])((?:[\w.@+~-]+/)*[\w@+~-][\w.@+~-]*\.[A-Za-z]\w{0,5})\1""")
_PYTHONS = ("python", "python3", "python2")
# what a command that changes a file has in it (redirections, heredocs, sed -i, rm, git checkout, ...)
_MAY_WRITE = re.compile(r">|<<|\bsed\b[^|;&]*\s-i|\b(?:rm|mv|cp|perl|tee|patch|apply_patch)\b"
                        r"|\bgit\s+(?:checkout|restore|apply)\b|\bpython[\d.]*\s+(?:-c\b|-(?:\s|$))")
MAX_JOINED_LINES = 200  # lines a quoted string may span in a command before it is given up as unbalanced


def _abs_join(cwd: str, p: str) -> str:
    """``p`` (quotes removed) joined to ``cwd`` unless it is absolute."""
    p = unquote(p)
    return p if p.startswith("/") or not cwd else posixpath.join(cwd, p)


def _sed_literal_repl(s: str) -> str:
    # GNU sed: ``\n`` in the replacement is a newline; other escapes stand for the character
    return re.sub(r"\\([^\w]|n)", lambda m: "\n" if m.group(1) == "n" else m.group(1), s)


def _sed_edits(args: list[str], fe: Callable[..., FileEdit]) -> list[FileEdit]:
    """The edits of ``sed -i`` (its arguments): a plain substitution's text, else ``changed``."""
    exprs: list[str] = []
    plain: list[str] = []
    it = iter(args)
    for a in it:
        if a in ("-e", "--expression"):
            exprs.append(next(it, ""))
        elif not a.startswith("-"):
            plain.append(a)
    if not exprs and plain:
        exprs, plain = [plain[0]], plain[1:]
    out = []
    for f in plain:
        if len(exprs) == 1 and (m := plain_substitution(exprs[0])):
            pat = m.group(2)
            pat = pat[1:] if pat.startswith("^") else pat  # anchors: the text is the rest
            pat = pat[:-1] if pat.endswith("$") and not pat.endswith("\\$") else pat
            out.append(fe(f, "replace", "sed", old=sed_unescape(pat), new=_sed_literal_repl(m.group(3))))
        else:
            out.append(fe(f, "changed", "sed"))  # line commands (``12,14c\``, ``28,34d``): the text is not shown
    return out


def command_lines(cmd: str) -> Iterator[tuple[str, int, str | None]]:
    """(line, its line number, the body of the heredoc it opens or None) of each command line of
    a shell command: backslash continuations joined, a quoted string that goes on over lines (a
    commit message, a ``python -c`` script) kept in its line, comments and blank lines left out."""
    raw = cmd.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(raw):
        line, start = raw[i], i + 1
        i += 1
        while line.endswith("\\") and i < len(raw):
            line, i = line[:-1] + " " + raw[i], i + 1
        if ("'" in line or '"' in line) and not _HEREDOC_OPEN.search(line) and shell_tokens(line) is None:
            joined, j = line, i
            while j < len(raw) and j - i < MAX_JOINED_LINES and shell_tokens(joined) is None:
                joined, j = joined + "\n" + raw[j], j + 1
            if shell_tokens(joined) is not None:
                line, i = joined, j
        body = None
        if (m := _HEREDOC_OPEN.search(line)) is not None:
            j = i
            while i < len(raw) and raw[i].strip() != m.group(2):
                i += 1
            body, i = "\n".join(raw[j:i]) + ("\n" if i > j else ""), i + 1
        if line.strip() and not line.lstrip().startswith("#"):
            yield line, start, body


def shell_edits(cmd: str, created: dict[str, str] | None = None, cwd: str = "",
                roots: tuple[str, ...] = ()) -> list[FileEdit]:
    """The file changes a shell command makes, as far as the command shows them (see the
    module docstring: sed substitutions, heredoc writes, rm, git checkout, scripts that write
    files they name). ``created`` (path -> content of files the run wrote) lets a later
    ``python script.py`` be followed into the script; ``cwd``: the folder it runs in (Codex's
    ``workdir``); ``roots``: the run's own roots."""
    created = created if created is not None else {}
    out: list[FileEdit] = []
    for line, _, body in command_lines(cmd):
        tokens = shell_tokens(line)
        if not tokens:
            continue
        for seg in shell_segments(tokens):
            if not seg or seg[0] in SHELL_OPERATORS:
                continue
            cwd = _segment_edits(seg, body, cwd, created, out, roots)
    return out


# a redirection operator as shell_tokens splits it (``2>/dev/null`` is ``2``, ``>``, ``/dev/null``)
_REDIRECT = re.compile(r"^(?:&>>?|>>?&?|<<?-?|<&|>\|)$")


def _operands(args: list[str]) -> list[str]:
    """A simple command's arguments without its redirections: the operator, its target, and the
    file-descriptor number before it (``rm f 2>/dev/null`` removes ``f`` only)."""
    out: list[str] = []
    skip = False
    for k, a in enumerate(args):
        if skip:
            skip = False
        elif _REDIRECT.match(a):
            skip = True
        elif not (a.isdigit() and k + 1 < len(args) and _REDIRECT.match(args[k + 1])):
            out.append(a)
    return out


def _segment_edits(seg: list[str], body: str | None, cwd: str, created: dict[str, str], out: list[FileEdit],
                   roots: tuple[str, ...] = ()) -> str:
    """Add the edits of one simple command (``body``: its heredoc) to ``out``; return the
    working directory after it."""
    def fe(p: str, op: str, via: str, **kw: Any) -> FileEdit:
        full = _abs_join(cwd, p)
        return FileEdit(normalize_path(full, "", roots), op, via, in_repo=in_repo(full, roots), **kw)

    prog, args = seg[0], seg[1:]
    if prog == "cd" and args:
        return _abs_join(cwd, args[0])
    target = None
    for k, t in enumerate(seg[:-1]):
        if t in (">", ">>") and seg[k + 1] not in ("/dev/null",) and not seg[k + 1].startswith("&"):
            target = seg[k + 1]
    files = [a for a in _operands(args) if not a.startswith("-")]
    if prog in ("cat", "tee") and body is not None:
        dest = target or (files[-1] if prog == "tee" and files else None)
        if dest:
            e = fe(dest, "create", "heredoc", new=body)
            created[e.path] = body
            out.append(e)
        return cwd
    if prog == "sed" and any(a.startswith("-i") or a == "--in-place" for a in args):
        out.extend(_sed_edits(sed_operands(_operands(args)), fe))
        return cwd
    if prog in ("apply_patch", "applypatch") and body is not None:  # Codex's patch tool, as a command
        out.extend(patch_edits(body, fe))
        return cwd
    if (prog == "git" and args[:1] == ["apply"] or prog == "patch") and body is not None:
        out.extend(diff_edits(body, fe))
        return cwd
    if prog == "rm":
        for f in files:
            e = fe(f, "delete", "shell")
            created.pop(e.path, None)
            out.append(e)
        return cwd
    if prog == "git" and args[:1] in (["checkout"], ["restore"]):
        if args[0] == "restore" and any(a in ("--staged", "-S") for a in args) and \
                not any(a in ("--worktree", "-W") for a in args):
            return cwd  # unstages: the files keep their changes
        for f in _operands(args)[1:]:
            if f != "--" and not f.startswith("-") and PATHISH.match(f):
                out.append(fe(f, "revert", "shell"))
        return cwd
    if prog in _PYTHONS or prog.startswith("python3."):
        script = None
        if body is not None and ("-" in args or not files):  # python - <<EOF, python <<EOF
            script = body
        elif "-c" in args and args.index("-c") + 1 < len(args):
            script = args[args.index("-c") + 1]
        elif files and files[0].endswith(".py"):
            script = created.get(normalize_path(_abs_join(cwd, files[0])))
        if script and _WRITES.search(script):
            paths = list(dict.fromkeys(m.group(2) for m in _QUOTED_PATH.finditer(script)))
            change = script_replace(script) if len(paths) == 1 else None
            for path in paths:
                if change is not None:
                    out.append(fe(path, "replace", "script", old=change[0], new=change[1]))
                else:
                    out.append(fe(path, "changed", "script"))
        return cwd
    if prog in ("mv", "cp") and len(files) >= 2:
        if prog == "mv":
            out.append(fe(files[0], "delete", "shell"))
        out.append(fe(files[-1], "changed", "shell"))
        return cwd
    if prog == "perl" and any(a.startswith("-i") or a.startswith("-pi") for a in args):
        out.extend(fe(f, "changed", "shell") for f in files[1:])
        return cwd
    if target is not None:
        out.append(fe(target, "changed", "shell"))  # echo/printf/... > f: the content is the command's output
    return cwd


_SCRIPT_OTHER_CHANGES = frozenset({"sub", "subn", "insert", "append", "extend", "pop", "remove", "writelines",
                                   "splitlines", "split", "join", "format", "strip", "rstrip", "lstrip", "upper",
                                   "lower", "replace_all"})


def script_replace(script: str) -> tuple[str, str] | None:
    """(old, new) when a Python script's only change to the text it writes is one
    ``str.replace`` of literal text (``s.replace(old, new)``, the strings given inline or bound
    once to names); None when it does anything else to it (regex substitutions, line lists,
    several replacements: which ran is not in the log)."""
    try:
        tree = ast.parse(script)
    except (SyntaxError, ValueError):
        return None
    consts: dict[str, str | None] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.AugAssign):
            return None
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
                and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            name = node.targets[0].id
            consts[name] = node.value.value if name not in consts else None  # bound twice: ambiguous
    calls = [(n.func.attr, n) for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    if any(attr in _SCRIPT_OTHER_CHANGES for attr, _ in calls):
        return None
    replaces = [c for attr, c in calls if attr == "replace"]
    if len(replaces) != 1 or len(replaces[0].args) < 2:
        return None

    def text(node: ast.AST) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return consts.get(node.id)
        return None

    old, new = text(replaces[0].args[0]), text(replaces[0].args[1])
    return (old, new) if old is not None and new is not None and old else None


def patch_edits(text: str, fe: Callable[..., FileEdit]) -> list[FileEdit]:
    """The edits of a Codex ``apply_patch`` envelope (``fe``: path, op, via -> FileEdit)."""
    out: list[FileEdit] = []
    for f in apply_patch_files(text) or []:
        if f.op == "add":
            out.append(fe(f.path, "create", "patch", new=f.content))
        elif f.op == "delete":
            out.append(fe(f.path, "delete", "patch"))
        else:
            out.extend(fe(f.path, "replace", "patch", old=old, new=new) for old, new in f.hunks)
            if not f.hunks:
                out.append(fe(f.path, "changed", "patch"))
            if f.move_to:
                out.append(fe(f.path, "delete", "patch"))
                out.append(fe(f.move_to, "changed", "patch"))
    return out


def diff_edits(text: str, fe: Callable[..., FileEdit]) -> list[FileEdit]:
    """The edits of a unified diff given to ``git apply`` / ``patch`` (its change blocks)."""
    files = parse_patch(text)
    out: list[FileEdit] = []
    for path, fp in (files or {}).items():
        if fp.status == "deleted":
            out.append(fe(path, "delete", "patch"))
            continue
        out.extend(fe(path, "replace", "patch", old="\n".join(b.removed), new="\n".join(b.added)) for b in fp.blocks)
    return out


_CREATES = frozenset({"write", "create_file", "write_file", "write_to_file", "newfilecreated", "create"})


def _editor_edits(e: Event, roots: tuple[str, ...] = ()) -> list[FileEdit]:
    """The edits of a file tool's call (any agent's: see the module docstring)."""
    args = parse_args(e.arguments or "")
    name = (e.tool or "").lower()
    command = args.get("command")
    if name == "apply_patch" and isinstance(patch := args.get("_raw", args.get("input")), str):
        return patch_edits(patch, lambda p, op, via, **kw: FileEdit(
            normalize_path(p, "", roots), op, via, in_repo=in_repo(p, roots), **kw))
    raw = tool_path(args)
    if not isinstance(raw, str):
        return []
    p, inside = normalize_path(raw, "", roots), in_repo(raw, roots)

    def fe(op: str, **kw: Any) -> FileEdit:
        return FileEdit(p, op, "editor", in_repo=inside, **kw)

    if command == "create" or (command is None and name in _CREATES) or (name == "aider_edit" and "content" in args):
        return [fe("create", new=file_content(args) or "")]
    if command == "view":
        return []
    if command == "insert":
        line = args.get("insert_line")
        new = args.get("new_str") if isinstance(args.get("new_str"), str) else file_content(args)
        return [fe("insert", new=new, line=line if isinstance(line, int) else None)]
    if command == "undo_edit":
        return [fe("undo")]
    if name == "notebookedit":
        return [fe("changed")]  # a cell of the notebook's JSON: not a text replacement
    diff = args.get("diff") if name in ("replace_in_file", "apply_diff") else \
        args.get("content") if name == "editedexistingfile" else None
    if isinstance(diff, str):  # Cline: SEARCH/REPLACE blocks
        blocks = search_replace_blocks(diff)
        return [fe("replace", old=b.search, new=b.replace) for b in blocks] if blocks else [fe("changed")]
    if isinstance(args.get("edits"), list):  # MultiEdit, and edit tools taking several replacements
        pairs = [old_new(x) if isinstance(x, dict) else None for x in args["edits"]]
        if pairs and all(pairs):
            return [fe("replace", old=x[0], new=x[1]) for x in pairs if x]
        return [fe("changed")]
    pair = old_new(args)
    if pair is not None:
        return [fe("replace", old=pair[0], new=pair[1])]
    if command == "str_replace" or (command is None and name not in ("read", "view", "open", "read_file", "readfile")):
        return [fe("changed")]  # its change is not in the log (``replace_all``, an unknown argument shape)
    return []


def refused(e: Event) -> bool:
    """A file tool's call the log says did not apply: its result reports a failure in its first
    lines (the rest may echo the file, whose code can say ``error``), or (an Aider edit, which has
    no result) Aider said so; its verdict stands whatever message the action is paired with (the LLM
    history's next user message, "I updated the files.", is no result of the block)."""
    if e.result is None or e.error is True:
        return e.error is True
    head = e.result.text.split("\n", 2)[:2]  # (normalized: blank lines are gone)
    return e.result.error is True or (e.result.rc not in (None, 0)) or failed(replace(e.result, text="\n".join(head)))


def editor_action(e: Event, swe_agent: bool = False) -> bool:
    """An action of a file editor: a view, an edit, a create, an undo (a tool's, or SWE-agent's
    windowed text commands when ``swe_agent``). Its result is the editor's reply about the file it
    was told to work on (a confirmation, a refusal, the file's content), never news about another."""
    if e.key.startswith(("action:edit", "action:create", "action:undo", "action:view")):
        return True
    if tool_kind(e.tool) != "shell":
        return (e.tool or "").lower() in _OPEN_TOOLS or (e.tool or "").lower() in ("edit", "insert")
    return swe_agent and _WINDOWED.match(e.text) is not None


def workdir(e: Event) -> str:
    """The folder a shell call ran in, when its arguments name one (Codex's ``workdir``) or its
    message records one apart from the session's (Claude Code's ``cwd`` after a ``cd``); else ""."""
    named = shell_workdir(parse_args(e.arguments)) if e.arguments else None
    return named or e.cwd or ""


# SWE-agent's windowed editor, as text commands: ``open f``, ``create f``, ``edit N:M`` ... ``end_of_edit``,
# ``insert N`` ... ``end_of_insert``, ``append`` ... ``end_of_append``
_WINDOWED = re.compile(r"^(open|create|edit|insert|append)\b[ \t]*([^\n]*)")
_LINE_RANGE = re.compile(r"^\d+:\d+$")
_OPEN_TOOLS = frozenset({"open", "create", "open_file"})


def _windowed_edits(e: Event, open_file: str | None, roots: tuple[str, ...],
                    text_commands: bool) -> tuple[list[FileEdit] | None, str | None]:
    """SWE-agent's windowed editor (its text commands, and its ``edit`` / ``insert`` tools that name
    no file): (the edits, or None when the action is not one of them; the open file after it). The
    text commands are read only for a SWE-agent run (``text_commands``): elsewhere ``open`` is a program.
    ``edit``, ``insert`` and ``append`` change the file ``open`` or ``create`` opened last."""
    def fe(p: str, op: str, **kw: Any) -> FileEdit:
        return FileEdit(normalize_path(p, "", roots), op, "editor", in_repo=in_repo(p, roots), **kw)

    name = (e.tool or "").lower()
    if tool_kind(e.tool) != "shell":
        args = parse_args(e.arguments or "")
        path = tool_path(args)
        if name in _OPEN_TOOLS and path:
            return ([fe(path, "create", new=file_content(args) or "")] if name == "create" else []), path
        if name in ("edit", "insert") and path is None and open_file:
            pair = old_new(args)
            if pair is not None:
                return [fe(open_file, "replace", old=pair[0], new=pair[1])], open_file
            line = args.get("line") if isinstance(args.get("line"), int) else None
            text = file_content(args)
            return [fe(open_file, "insert" if name == "insert" and text is not None else "changed", new=text,
                       line=line)], open_file
        return None, open_file
    m = _WINDOWED.match(e.text) if text_commands else None
    if m is None:
        return None, open_file
    verb, rest = m.group(1), m.group(2).split()
    body = e.text.split("\n", 1)[1] if "\n" in e.text else ""
    body = re.sub(r"\n?end_of_(?:edit|insert|append)\s*$", "", body)
    if verb == "open" and rest:
        return [], rest[0]
    if verb == "create" and len(rest) == 1:
        return [fe(rest[0], "create", new="")], rest[0]
    if open_file and ((verb == "edit" and len(rest) == 1 and _LINE_RANGE.match(rest[0])) or
                      (verb == "insert" and len(rest) == 1 and rest[0].isdigit()) or (verb == "append" and not rest)):
        if verb == "insert":
            return [fe(open_file, "insert", new=body + "\n", line=int(rest[0]))], open_file
        return [fe(open_file, "changed", new=body)], open_file  # lines N..M replaced: their old text is not here
    return None, open_file


def run_edits(rev: RunEvents) -> list[EditAction]:
    """The run's actions that changed files, in order. A file tool's call whose result reports a
    failure ("No replacement was performed", an ``is_error`` flag, an edit SWE-agent's linter
    refused) changed nothing and is left out, as is a call of a reply the harness cut off that got no
    result (it never ran: ``skip == "cut_off"``); a shell command that returned non-zero is kept (the
    edit may come before the failing part). A file tool's call the run repeated (a retry the
    alignment sets aside) counts when it applied."""
    out: list[EditAction] = []
    created: dict[str, str] = {}
    roots = rev.roots
    open_file: str | None = None  # SWE-agent's windowed editor
    for e in rev.events:
        if e.type != "action" or e.key == "action:submit" or e.skip not in (None, "retry"):
            continue
        kind = tool_kind(e.tool)
        if e.skip == "retry" and (kind == "shell" or e.result is None or refused(e)):
            continue
        windowed, open_file = _windowed_edits(e, open_file, roots, rev.format == "swe_agent")
        if windowed is not None:
            if refused(e):
                continue
            edits = windowed
        elif kind == "shell":
            # most commands cannot write a file: skip them without tokenizing (a long run has thousands)
            if not _MAY_WRITE.search(e.text) and not (created and ".py" in e.text):
                continue
            edits = shell_edits(e.text, created, workdir(e), roots)
        elif is_read_only(e.key):
            continue
        elif e.arguments is not None and (kind == "editor" or (e.tool or "").lower() in WRITE_TOOLS or
                                          e.key.split(" ", 1)[0] in ("action:create", "action:edit", "action:undo")):
            if refused(e):
                continue
            edits = _editor_edits(e, roots)
            for x in edits:
                if x.op == "create" and x.new is not None:
                    created[x.path] = x.new
        else:
            continue
        if edits:
            out.append(EditAction(e, edits))
    return out
