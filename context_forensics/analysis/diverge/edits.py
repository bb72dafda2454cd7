"""Edits: the changes a run's actions made to files, as far as the log shows them.

Editor calls (``str_replace``, ``create``, ``insert``, ``undo_edit``, Claude Code's ``Edit`` /
``MultiEdit`` / ``Write``) show their change; so do some shell commands (``shell_edits``): a
``sed -i`` substitution, a heredoc write, ``rm``, ``git checkout``/``restore`` of a file, and a
Python script (inline, piped, or a file the run wrote) that makes one literal ``str.replace`` to
a file it names (``script_replace``). Other writes (``sed`` line commands, ``perl -i``, ``mv``,
``echo > f``, scripts doing more) are ``changed``: the file changed, how is not in the log.
``run_edits`` lists a run's actions that changed files, in order (``EditAction``).
"""

from __future__ import annotations

import ast
import posixpath
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .actions import (PATHISH, SHELL_OPERATORS, is_read_only, parse_args, plain_substitution, sed_unescape,
                      shell_segments, shell_tokens, tool_kind)
from .display import cap
from .events import Event, RunEvents, failed
from .normalize import in_repo, normalize_path, unquote
from .patches import Block, added_blocks, blocks_between


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
_MAY_WRITE = re.compile(r">|<<|\bsed\b[^|;&]*\s-i|\b(?:rm|mv|cp|perl|tee|patch)\b|\bgit\s+(?:checkout|restore)\b"
                        r"|\bpython[\d.]*\s+(?:-c\b|-(?:\s|$))")


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


def shell_edits(cmd: str, created: dict[str, str] | None = None, cwd: str = "") -> list[FileEdit]:
    """The file changes a shell command makes, as far as the command shows them (see the
    module docstring: sed substitutions, heredoc writes, rm, git checkout, scripts that write
    files they name). ``created`` (path -> content of files the run wrote) lets a later
    ``python script.py`` be followed into the script."""
    created = created if created is not None else {}
    out: list[FileEdit] = []
    raw = cmd.replace("\r\n", "\n").split("\n")
    i = 0
    while i < len(raw):
        line = raw[i]
        i += 1
        while line.endswith("\\") and i < len(raw):
            line = line[:-1] + " " + raw[i]
            i += 1
        body = None
        if (m := _HEREDOC_OPEN.search(line)) is not None:
            buf = []
            while i < len(raw) and raw[i].strip() != m.group(2):
                buf.append(raw[i])
                i += 1
            i += 1
            body = "\n".join(buf) + ("\n" if buf else "")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        tokens = shell_tokens(line)
        if not tokens:
            continue
        for seg in shell_segments(tokens):
            if not seg or seg[0] in SHELL_OPERATORS:
                continue
            cwd = _segment_edits(seg, body, cwd, created, out)
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


def _segment_edits(seg: list[str], body: str | None, cwd: str, created: dict[str, str], out: list[FileEdit]) -> str:
    """Add the edits of one simple command (``body``: its heredoc) to ``out``; return the
    working directory after it."""
    def fe(p: str, op: str, via: str, **kw: Any) -> FileEdit:
        full = _abs_join(cwd, p)
        return FileEdit(normalize_path(full), op, via, in_repo=in_repo(full), **kw)

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
        out.extend(_sed_edits(_operands(args), fe))
        return cwd
    if prog == "rm":
        for f in files:
            e = fe(f, "delete", "shell")
            created.pop(e.path, None)
            out.append(e)
        return cwd
    if prog == "git" and args[:1] in (["checkout"], ["restore"]):
        for f in _operands(args)[1:]:
            if f != "--" and not f.startswith("-") and PATHISH.match(f):
                out.append(fe(f, "revert", "shell"))
        return cwd
    if prog in _PYTHONS or prog.startswith("python3."):
        script = None
        if "-" in args and body is not None:
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
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    if any(c.func.attr in _SCRIPT_OTHER_CHANGES for c in calls):  # type: ignore[attr-defined]
        return None
    replaces = [c for c in calls if c.func.attr == "replace"]  # type: ignore[attr-defined]
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


def _editor_edits(e: Event) -> list[FileEdit]:
    """The edits of a file-editor call (or a file tool's write / edit)."""
    args = parse_args(e.arguments or "")
    command = args.get("command")
    raw = args.get("path") or args.get("file_path") or args.get("filename")
    if not isinstance(raw, str):
        return []
    p, inside = normalize_path(raw), in_repo(raw)
    name = (e.tool or "").lower()

    def s(k: str) -> str | None:
        return args[k] if isinstance(args.get(k), str) else None

    if command == "create" or name in ("write", "create_file", "write_file"):
        return [FileEdit(p, "create", "editor", new=s("file_text") or s("content") or "", in_repo=inside)]
    if command == "str_replace":
        return [FileEdit(p, "replace", "editor", old=s("old_str"), new=s("new_str"), in_repo=inside)]
    if command == "insert":
        line = args.get("insert_line")
        return [FileEdit(p, "insert", "editor", new=s("new_str"), line=line if isinstance(line, int) else None,
                         in_repo=inside)]
    if command == "undo_edit":
        return [FileEdit(p, "undo", "editor", in_repo=inside)]
    if name == "edit" and s("old_string") is not None and not args.get("replace_all"):
        return [FileEdit(p, "replace", "editor", old=s("old_string"), new=s("new_string"), in_repo=inside)]
    if name == "multiedit" and isinstance(args.get("edits"), list):
        return [FileEdit(p, "replace", "editor", old=x.get("old_string"), new=x.get("new_string"), in_repo=inside)
                for x in args["edits"] if isinstance(x, dict) and isinstance(x.get("old_string"), str)]
    if command is None and name not in ("read", "view", "open", "read_file"):
        return [FileEdit(p, "changed", "editor", in_repo=inside)]
    return []


def run_edits(rev: RunEvents) -> list[EditAction]:
    """The run's actions that changed files, in order. An editor call whose result reports a
    failure ("No replacement was performed") changed nothing and is left out; a shell command
    that returned non-zero is kept (the edit may come before the failing part)."""
    out: list[EditAction] = []
    created: dict[str, str] = {}
    for e in rev.aligned():
        if e.type != "action" or e.key == "action:submit":
            continue
        kind = tool_kind(e.tool)
        if kind == "shell":
            # most commands cannot write a file: skip them without tokenizing (a long run has thousands)
            if not _MAY_WRITE.search(e.text) and not (created and ".py" in e.text):
                continue
            edits = shell_edits(e.text, created)
        elif is_read_only(e.key):
            continue
        elif e.arguments is not None and (kind == "editor" or e.key.split(" ", 1)[0] in
                                          ("action:create", "action:edit", "action:undo")):
            if e.result is not None and failed(e.result):
                continue
            edits = _editor_edits(e)
            for x in edits:
                if x.op == "create" and x.new is not None:
                    created[x.path] = x.new
        else:
            continue
        if edits:
            out.append(EditAction(e, edits))
    return out
