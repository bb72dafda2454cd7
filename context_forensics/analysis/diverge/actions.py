"""Actions: the canonical key of a tool call or a shell command, one vocabulary for every harness.

Actions are canonicalized so that an OpenHands run and a mini-swe-agent run compare:
``execute_bash``/``bash``/``shell`` calls and text actions become the same ``shell: <command>``
(whitespace, quoting, ``cd <dir> &&`` prefixes, ``python3`` and ``python -m pytest``, and
absolute repo roots such as ``/testbed`` or ``/workspace/<instance>`` normalized away), and
editor tools and their shell equivalents map to one verb:

- ``cat f`` / ``cat -n f`` / editor ``view f`` / ``Read f`` are ``view f``; ``sed -n 'a,bp' f``,
  ``nl -ba f | sed -n 'a,bp'``, ``head -n b f`` and an editor ``view_range`` are ``view f[a:b]``;
- ``ls [flags] d`` is ``list d -flags``; an editor view of a folder is ``list d (2 levels)``
  (a different listing with a different output, so not the same action as any ``ls``);
- heredoc writes (``cat <<'EOF' > f``) and editor ``create`` are ``create f #<content hash>``;
- a plain ``sed -i 's/old/new/' f``, editor ``str_replace(old, new)``, ``Edit``, Pi's and Copilot
  CLI's ``edit``, Gemini CLI's ``replace`` and one Aider SEARCH/REPLACE block are
  ``edit f #<hash of (old, new)>``; other edits (``MultiEdit``, Cline's ``replace_in_file``, an
  ``apply_patch``) hash their arguments; every agent's file writes (``Write``, ``write_file``,
  ``write_to_file``, ``create``) are ``create f #<content hash>``;
- mini-swe-agent's submit command, ``finish`` and ``submit`` tools are ``submit``.

``is_read_only`` tells the actions that only look (views, listings, searches, ``git diff``...)
from those that change something; ``tool_kind`` says which kind of tool made a call. The shell
lexing here (``shell_tokens``, ``shell_segments``) is shared with ``edits``.
"""

from __future__ import annotations

import json
import re
import shlex
from typing import Any

from .normalize import content_key, mask_noise, normalize_path, short_hash, strip_roots

SUBMIT_MARKERS = ("COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT", "MINI_SWE_AGENT_FINAL_OUTPUT")
SHELL_TOOLS = frozenset({"bash", "execute_bash", "shell", "run_shell_command", "exec_command", "run_command",
                         "terminal", "local_shell", "container.exec", "cmd", "run", "execute_command",
                         "shell_command"})
EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "edit_file", "file_editor",
                          "text_editor"})
# every agent's file tools that change a file (the tool, lower-cased): Claude Code (Edit, MultiEdit,
# Write, NotebookEdit), Pi (edit, write), Cline (replace_in_file, write_to_file; its UI's
# editedExistingFile, newFileCreated), Gemini CLI (replace, write_file), Copilot CLI (edit,
# create), Codex (apply_patch), OpenHands/SWE-agent (str_replace_editor's write commands,
# create, edit, insert), Aider (aider_edit: a block of its reply), and the like
WRITE_TOOLS = frozenset({"edit", "multiedit", "write", "notebookedit", "replace_in_file", "write_to_file",
                         "editedexistingfile", "newfilecreated", "replace", "write_file", "create", "create_file",
                         "apply_patch", "aider_edit", "insert", "edit_file", "str_replace", "search_replace",
                         "edit_notebook", "append_file", "overwrite_file", "apply_diff", "search_and_replace",
                         "insert_content"})
PATH_KEYS = ("path", "file_path", "absolutePath", "absolute_path", "filePath", "filename", "notebook_path",
             "target_file", "file")
SUBMIT_TOOLS = frozenset({"finish", "submit", "task_complete", "attempt_completion", "done", "final_answer"})
_CD_PREFIX = re.compile(r"^cd\s+(\"[^\"]*\"|'[^']*'|[^\s;&|]+)\s*(?:&&|;)\s*")
_HEREDOC = re.compile(
    r"^cat\s+(?:<<-?\s*(['\"]?)(?P<d1>\w+)\1\s*>\s*(?P<p1>\S+)|>\s*(?P<p2>\S+)\s*<<-?\s*(['\"]?)(?P<d2>\w+)\5)\s*\n")
_SED_RANGE = re.compile(r"^(\d+)(?:,(\d+|\$))?p$")
PATHISH = re.compile(r"^[\w.@+~-]*(?:/[\w.@+~-]*)+$|^[\w@+~-][\w.@+~-]*\.[A-Za-z]\w{0,5}$")
SHELL_OPERATORS = ("|", "&&", ";", "||", "&")


def shell_tokens(cmd: str) -> list[str] | None:
    """A command's shell tokens (operators apart, quotes removed); None when it does not lex
    (unbalanced quotes)."""
    try:
        lex = shlex.shlex(cmd, posix=True, punctuation_chars=";&|<>()")
        lex.whitespace_split = True
        lex.commenters = ""
        return list(lex)
    except ValueError:
        return None


def shell_segments(tokens: list[str]) -> list[list[str]]:
    """The tokens split into simple commands, each operator a one-token segment between them."""
    out: list[list[str]] = [[]]
    for t in tokens:
        if t in SHELL_OPERATORS:
            out.append([t])
            out.append([])
        else:
            out[-1].append(t)
    return out


SED_SUB = re.compile(r"^s(.)((?:\\.|(?!\1).)*)\1((?:\\.|(?!\1).)*)\1(\w*)$", re.DOTALL)


def plain_substitution(expr: str) -> re.Match[str] | None:
    """A ``sed`` expression that is one plain ``s/old/new/`` (no flag but ``g``), as a match of
    ``SED_SUB`` (groups 2 and 3: old and new, still escaped); else None."""
    m = SED_SUB.match(expr)
    return m if m and not (set(m.group(4)) - set("g")) else None


def sed_unescape(s: str) -> str:
    """A ``sed`` pattern's escaped punctuation as the characters themselves."""
    return re.sub(r"\\([^\w])", r"\1", s)


def _range(a: str, b: str | None) -> str:
    """``[a:b]``, an open end for ``$`` / ``-1``."""
    return f"[{a}:{'' if b in (None, '$', '-1') else b}]"


def _view_of(tokens: list[str], cwd: str, roots: tuple[str, ...] = ()) -> str | None:
    """``view`` / ``list`` for read-only one-file shell commands, else None."""
    if not tokens:
        return None
    cmd, args = tokens[0], tokens[1:]
    files = [a for a in args if not a.startswith("-")]
    flags = [a for a in args if a.startswith("-")]
    if cmd == "cat" and len(files) == 1 and set(flags) <= {"-n"}:
        return f"view {normalize_path(files[0], cwd, roots)}"
    if cmd == "ls" and len(files) <= 1:
        letters = "".join(sorted(set("".join(f.lstrip("-") for f in flags))))
        target = normalize_path(files[0], cwd, roots) if files else normalize_path(".", cwd)
        return f"list {target}" + (f" -{letters}" if letters else "")
    if cmd == "head":
        n = None
        rest = []
        it = iter(args)
        for a in it:
            if a == "-n":
                n = next(it, None)
            elif re.fullmatch(r"-\d+", a):
                n = a[1:]
            elif a.startswith("-n") and a[2:].isdigit():
                n = a[2:]
            else:
                rest.append(a)
        if len(rest) == 1 and n and n.isdigit():
            return f"view {normalize_path(rest[0], cwd, roots)}{_range('1', n)}"
    if cmd == "sed" and len(args) == 3 and args[0] == "-n":
        return _sed_view(args[1], args[2], cwd, roots)
    return None


def _sed_view(expr: str, path: str, cwd: str, roots: tuple[str, ...] = ()) -> str | None:
    """``view f[a:b]`` for ``sed -n 'a,bp' f`` (and ``'ap'``), else None."""
    m = _SED_RANGE.match(expr)
    return f"view {normalize_path(path, cwd, roots)}{_range(m.group(1), m.group(2) or m.group(1))}" if m else None


def canonical_shell(cmd: str, roots: tuple[str, ...] = ()) -> str:
    """A shell command's canonical key (see the module docstring); ``roots``: the run's own."""
    s = cmd.strip()
    if any(m in s for m in SUBMIT_MARKERS):
        return "submit"
    if s.startswith("submit") and s.split()[0] == "submit":
        return "submit"
    cwd = ""
    while True:
        m = _CD_PREFIX.match(s)
        if not m:
            break
        cwd = normalize_path(m.group(1), cwd, roots)
        s = s[m.end():].lstrip()
    m = _HEREDOC.match(s)
    if m:
        delim = m.group("d1") or m.group("d2")
        path = normalize_path(m.group("p1") or m.group("p2"), cwd, roots)
        body = s[m.end():]
        end = re.search(rf"^{re.escape(delim)}\s*$", body, re.MULTILINE)
        content, rest = (body[:end.start()], body[end.end():]) if end else (body, "")
        key = f"create {path} #{content_key(content)}"
        rest = re.sub(r"^\s*(?:&&|;|\|\|)\s*", "", rest.strip())
        return f"{key} && {canonical_shell(rest, roots)}" if rest else key
    if not s:
        return "shell:"
    tokens = shell_tokens(s) if "\n" not in s or s.count("\n") < 3 else None
    if tokens is None:  # unbalanced quotes or a script: compare it as whitespace-normalized text
        return "shell: " + " ".join(mask_noise(s, roots).split())
    tokens = ["python" if t == "python3" else t for t in tokens]
    segs = shell_segments(tokens)
    if len(segs) == 1:
        v = _view_of(segs[0], cwd, roots)
        if v:
            return v
        if segs[0][:1] == ["sed"] and any(a == "-i" or a.startswith("-i") for a in segs[0][1:]):
            args = [a for a in sed_operands(segs[0][1:]) if not a.startswith("-")]
            target = normalize_path(args[-1], cwd, roots) if len(args) >= 2 else "?"
            sub = plain_substitution(args[0]) if len(args) == 2 else None
            if sub:
                # a plain s/old/new/ is the same edit as the editor's str_replace(old, new)
                return edit_key(target, {"old_str": sed_unescape(sub.group(2)), "new_str": sed_unescape(sub.group(3))})
            return f"edit {target} #{content_key(' '.join(segs[0]))}"
    if len(segs) == 3 and segs[1] == ["|"]:  # nl -ba f | sed -n 'a,bp', cat -n f | sed -n ...
        left, right = segs[0], segs[2]
        if left[:2] in (["nl", "-ba"], ["cat", "-n"]) and len(left) == 3 and right[:2] == ["sed", "-n"] \
                and len(right) == 3:
            v = _sed_view(right[2], left[2], cwd, roots)
            if v:
                return v
    out = []
    for seg in segs:
        if seg[:3] == ["python", "-m", "pytest"]:
            seg = ["pytest", *seg[3:]]
        for t in seg:
            if PATHISH.match(t) and not t.startswith("-"):
                out.append(normalize_path(t, cwd, roots))
            else:
                t = mask_noise(t, roots)
                out.append(shlex.quote(t) if any(c.isspace() for c in t) else t)
    return "shell: " + " ".join(x for x in out if x)


def sed_operands(args: list[str]) -> list[str]:
    """``sed``'s arguments with BSD sed's in-place suffix joined to its ``-i`` (``sed -i '' 's/a/b/'
    f``: the empty word is the suffix, not the script)."""
    out: list[str] = []
    it = iter(range(len(args)))
    for k in it:
        a = args[k]
        if a == "-i" and k + 1 < len(args) and (args[k + 1] == "" or args[k + 1].startswith(".")) and \
                k + 2 < len(args):
            out.append("-i" + args[k + 1])
            next(it, None)
        else:
            out.append(a)
    return out


def edit_key(path: str, change: dict[str, Any], roots: tuple[str, ...] = ()) -> str:
    """``edit <path> #<hash of the change>``; the change is normalized like every argument."""
    return f"edit {path} #{short_hash(json.dumps(_norm_value(change, roots), sort_keys=True))}"


def parse_args(arguments: str) -> dict[str, Any]:
    """A tool call's JSON arguments as a dict (``_raw`` / ``_value`` when they are not an object)."""
    try:
        v = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_raw": arguments}
    return v if isinstance(v, dict) else {"_value": v}


def _norm_value(v: Any, roots: tuple[str, ...] = ()) -> Any:
    """An argument value for comparison: strings with roots stripped and whitespace collapsed."""
    if isinstance(v, str):
        return " ".join(strip_roots(v, roots).split())
    if isinstance(v, list):
        return [_norm_value(x, roots) for x in v]
    if isinstance(v, dict):
        return {k: _norm_value(x, roots) for k, x in sorted(v.items())}
    return v


def tool_path(args: dict[str, Any]) -> str | None:
    """The file a file tool's arguments name (``path``, ``file_path``, Cline's ``absolutePath``...)."""
    for k in PATH_KEYS:
        v = args.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def old_new(args: dict[str, Any]) -> tuple[str, str] | None:
    """The (old, new) text of a one-replacement edit, in any agent's argument names, when it
    replaces one occurrence (not ``replace_all``); else None."""
    for old_k, new_k in (("old_str", "new_str"), ("old_string", "new_string"), ("oldText", "newText"),
                         ("oldString", "newString"), ("search", "replace")):
        old, new = args.get(old_k), args.get(new_k)
        if isinstance(old, str) and isinstance(new, str):
            return None if args.get("replace_all") or args.get("allow_multiple") else (old, new)
    return None


def file_content(args: dict[str, Any]) -> str | None:
    """The whole content a file write's arguments give (``content``, ``file_text``...)."""
    for k in ("content", "file_text", "text", "contents"):
        v = args.get(k)
        if isinstance(v, str):
            return v
    return None


def shell_command(args: dict[str, Any]) -> str | None:
    """The command a shell tool's arguments run (an argv list joined, ``bash -c`` unwrapped; Codex's
    ``["apply_patch", PATCH]`` as the ``apply_patch <<EOF`` it stands for; arguments that are no JSON
    object, as Cline's UI records a command, are the command)."""
    cmd = args.get("command", args.get("cmd", args.get("script", args.get("_raw"))))
    if isinstance(cmd, list) and all(isinstance(x, str) for x in cmd):
        if len(cmd) >= 3 and cmd[0] in ("bash", "sh", "zsh") and cmd[1] in ("-c", "-lc"):
            return cmd[2]
        if len(cmd) == 2 and cmd[0] in ("apply_patch", "applypatch"):
            return f"apply_patch <<'EOF'\n{cmd[1].rstrip()}\nEOF"
        return " ".join(shlex.quote(x) for x in cmd)
    return cmd if isinstance(cmd, str) else None


def shell_workdir(args: dict[str, Any]) -> str | None:
    """The folder a shell tool's call runs in, when its arguments name one (Codex's ``workdir``,
    Gemini CLI's ``directory``, ``cwd``)."""
    for k in ("workdir", "cwd", "directory", "dir_path"):
        v = args.get(k)
        if isinstance(v, str) and v:
            return v
    return None


def _editor(command: str, args: dict[str, Any], result: str | None, roots: tuple[str, ...] = ()) -> str | None:
    """The key of a file-editor call (``view``, ``create``, ``str_replace``...), else None."""
    path = tool_path(args)
    if not isinstance(path, str):
        return None
    p = normalize_path(path, "", roots)
    if command == "view":
        if result and result.lstrip().startswith("Here's the files and directories"):
            return f"list {p} (2 levels)"  # not ``ls``: a different listing, a different output
        rng = args.get("view_range")
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng):
            return f"view {p}{_range(str(rng[0]), str(rng[1]))}"
        return f"view {p}"
    if command == "create":
        return f"create {p} #{content_key(str(args.get('file_text') or args.get('content') or ''))}"
    if command in ("str_replace", "insert", "edit"):
        return edit_key(p, {k: v for k, v in args.items() if k not in ("path", "command")}, roots)
    if command == "undo_edit":
        return f"undo {p}"
    return None


_READ_TOOLS = ("read", "open", "read_file", "view", "readfile")
_CREATE_TOOLS = ("write", "create", "write_file", "create_file", "write_to_file", "newfilecreated")


def canonical_call(name: str, arguments: str, result: str | None = None,
                   roots: tuple[str, ...] = ()) -> tuple[str, str]:
    """(key, text) of a tool call: the canonical key and a readable form for diffs; ``roots``:
    the run's own (the working folder its log records), stripped from paths like harness roots."""
    args = parse_args(arguments)
    lname = name.lower()
    if lname in SUBMIT_TOOLS:
        return "submit", f"{name} {arguments}".strip()
    if lname in SHELL_TOOLS or lname == "bash":
        cmd = shell_command(args)
        if cmd is not None:
            return canonical_shell(cmd, roots), cmd
    if lname == "execute_ipython_cell" and isinstance(args.get("code"), str):
        return "python: " + " ".join(mask_noise(args["code"], roots).split()), args["code"]
    patch = args.get("_raw", args.get("input"))
    if lname == "apply_patch" and isinstance(patch, str):  # Codex's freeform apply_patch: the envelope itself
        return f"edit patch #{content_key(strip_roots(patch, roots))}", patch
    command = args.get("command")
    if (lname in EDITOR_TOOLS or isinstance(args.get("path"), str)) and isinstance(command, str):
        key = _editor(command, args, result, roots)
        if key:
            return key, _readable(name, args)
    # the file tools of Claude Code, Pi, Cline, Gemini CLI, Copilot CLI, SWE-agent, Aider ...
    fp = tool_path(args)
    if isinstance(fp, str):
        p = normalize_path(fp, "", roots)
        if lname in _READ_TOOLS:
            return f"view {p}", _readable(name, args)
        if lname in _CREATE_TOOLS or (lname == "aider_edit" and "content" in args):
            return f"create {p} #{content_key(str(file_content(args) or ''))}", _readable(name, args)
        if lname in WRITE_TOOLS:
            pair = old_new(args)
            change = {"old_str": pair[0], "new_str": pair[1]} if pair else {
                k: v for k, v in args.items() if k not in PATH_KEYS}
            return edit_key(p, change, roots), _readable(name, args)
    norm = json.dumps(_norm_value(args, roots), sort_keys=True, ensure_ascii=False)
    return f"{name} {norm}", _readable(name, args)


def _readable(name: str, args: dict[str, Any]) -> str:
    """A tool call as readable lines: its name, then one ``key: value`` per argument."""
    parts = [name]
    for k, v in args.items():
        parts.append(f"{k}: {v}" if not isinstance(v, str) or "\n" not in v else f"{k}:\n{v}")
    return "\n".join(parts)


def tool_kind(name: str | None) -> str | None:
    """``shell`` for shell tools and text actions, ``editor`` for file-editor tools, else the name."""
    if name is None:
        return None
    low = name.lower()
    if low in SHELL_TOOLS:
        return "shell"
    if low in EDITOR_TOOLS:
        return "editor"
    return low


_RO_PROGRAMS = frozenset({"ls", "cat", "find", "grep", "egrep", "fgrep", "rg", "ag", "head", "tail", "nl", "wc",
                          "pwd", "tree", "file", "stat", "which", "whereis", "du", "less", "more", "sort", "uniq",
                          "cut", "awk", "diff", "echo", "true", "basename", "dirname", "realpath", "readlink"})
_RO_GIT = frozenset({"diff", "log", "show", "status", "grep", "blame", "ls-files", "rev-parse", "branch"})
_RO_TOOLS = frozenset({"find_file", "search_dir", "search_file", "grep", "glob", "read", "open", "goto",
                       "scroll_up", "scroll_down", "view", "ls", "read_file", "list_dir", "list_files", "search",
                       "readfile", "search_files", "searchfiles", "listfilestoplevel", "listfilesrecursive",
                       "list_code_definition_names", "read_many_files", "list_directory", "glob_files",
                       "webfetch", "websearch", "web_search", "web_fetch", "google_web_search"})


def is_read_only(key: str) -> bool:
    """An action that looks without changing anything: views, listings, searches, git diff/log."""
    body = key.split(":", 1)[1] if key.startswith("action:") else key
    if body.startswith(("view ", "list ")):
        return True
    if body.startswith("shell: "):
        tokens = shell_tokens(body[7:])
        if not tokens:
            return False
        for seg in shell_segments(tokens):
            if seg in (["|"], ["&&"], ["||"], [";"]):
                continue
            if not seg or any(t in (">", ">>", "&", "<") for t in seg):
                return False
            prog, args = seg[0], seg[1:]
            if prog == "git":
                if not args or args[0] not in _RO_GIT:
                    return False
            elif prog == "sed":
                if any(a.startswith("-i") for a in args):
                    return False
            elif prog == "find":
                if any(a in ("-delete", "-exec", "-execdir", "-ok", "-fprint") for a in args):
                    return False
            elif prog not in _RO_PROGRAMS:
                return False
        return True
    name = body.split(" ", 1)[0].lower()
    return name in _RO_TOOLS
