"""Edit consistency: the edit calls a log holds, counted on their own, against the edits diverge
and explain see (``ctxf check``'s edit figures; the corpus suite asserts they agree).

``edit_calls`` reads the raw messages with its own table of every agent's edit tools and their
argument shapes, not ``run_edits``' code: Claude Code ``Edit`` / ``MultiEdit`` / ``Write`` /
``NotebookEdit``, Pi ``edit`` / ``write``, Cline ``replace_in_file`` / ``write_to_file`` (its UI's
``editedExistingFile`` / ``newFileCreated``), Gemini CLI ``replace`` / ``write_file``, Copilot CLI
``edit`` / ``create``, Codex ``apply_patch``, the OpenHands / SWE-agent editors' write commands,
SWE-agent's windowed ``edit`` / ``insert`` / ``create``, Aider's edit blocks (as Aider reports
them), and shell commands that plainly write a file: ``sed -i``, a heredoc written to a file, ``tee
f <<``, ``apply_patch``. Each call's result says whether it applied (the log's error flag, a
non-zero exit of an editor, the tool's own refusal); a call of a reply the harness cut off (Pi's
``stopReason`` error / aborted) with no result never ran. A call's file is inside the repository when
it is relative or under the working folder the log records (the session metadata's, else the root
``run_roots`` proves from the log, else a harness root).

``edit_consistency`` counts the calls that applied, those of them the effective edits hold (with
the right file, inside or outside the repository as the call's path says), the calls that did not
apply, and lists each call the analyses miss with why.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ...records import KIND_MESSAGE
from ...tool_output import CUT_OFF_STOPS, cline_result_tool, is_feedback, text_action
from .applied import applied_edits
from .edit_formats import AIDER_FAILED, aider_blocks, aider_failed_blocks
from .edits import EditAction
from .events import Event, extract_events
from .roots import run_roots

_EDIT_TOOLS = frozenset({"edit", "multiedit", "write", "notebookedit", "replace_in_file", "write_to_file",
                         "editedexistingfile", "newfilecreated", "replace", "write_file", "create", "insert",
                         "apply_patch"})
_EDITORS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "file_editor", "edit_file", "text_editor"})
_EDITOR_WRITES = frozenset({"create", "str_replace", "insert", "undo_edit"})
_SHELLS = frozenset({"bash", "shell", "execute_bash", "run_shell_command", "exec_command", "execute_command",
                     "run_command", "terminal", "local_shell", "shell_command"})
_PATHS = ("file_path", "path", "absolutePath", "notebook_path", "filename", "filePath")
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+?)\s*$", re.MULTILINE)
_SED_I = re.compile(r"(?:^|[;&|(]\s*)sed\s+(?:-[A-Za-z]+\s+)*(?:-i\S*|--in-place\S*)")
_HEREDOC_WRITE = re.compile(r"(?:^|[;&|(]\s*)(?:cat\s*(?:>>?\s*(?P<a>[^\s<;&|]+)\s*<<|<<-?\s*['\"]?\w+['\"]?\s*>>?\s*"
                            r"(?P<b>[^\s;&|]+))|tee\s+(?:-a\s+)?(?P<c>[^\s<;&|]+)\s*<<)", re.MULTILINE)
_APPLY_PATCH = re.compile(r"(?:^|[;&|(]\s*)apply_patch\b", re.MULTILINE)
_WINDOWED = re.compile(r"^(edit\s+\d+:\d+|insert\s+\d+|append\b|create\s+(\S+))")
_OPENS = re.compile(r"^(?:open|create)\s+(\S+)")
_REFUSED = re.compile(r"<tool_use_error>|could not find the exact text|no replacement was performed|string to replace "
                      r"not found|old_string not found|found \d+ matches of the string|your changes have not been "
                      r"applied|your proposed edit has introduced new syntax error|the tool execution failed"
                      r"|the user denied this operation|doesn't want to proceed with this tool use|\A\s*error\b",
                      re.IGNORECASE | re.MULTILINE)
_SHELL_FAILED = re.compile(r"^sed: (?:-e expression|can't read)|syntax error|^(?:\w+: )?line \d+: .*: No such file",
                           re.MULTILINE)
_HARNESS = re.compile(r"^(?:/testbed|/repo|/workspace/[\w.-]+__[\w.-]+|/[\w.-]+__[\w.-]+)(?:/|$)")
_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")


@dataclass
class EditCall:
    """One edit call in the log: where, which tool, which file (None: the call names none), whether
    its result says it applied, and whether its file is inside the working folder."""

    seq: int
    step: int | None
    tool: str
    path: str | None
    applied: bool
    inside: bool
    arguments: str | None = None  # a tool call's raw arguments (None: a text action, an Aider block)


def _folders(fmt: str, metadata: Mapping[str, Any], messages: Sequence[Any]) -> list[str]:
    """The working folders the log records (the session metadata's, else what ``run_roots`` proves)."""
    out = []
    ctx: Mapping[str, Any] = metadata["context"] if isinstance(metadata.get("context"), Mapping) else {}
    for v in (metadata.get("cwd"), ctx.get("gitRoot"), ctx.get("cwd")):
        if isinstance(v, str) and v.strip():
            out.append(v.strip().replace("\\", "/").rstrip("/"))
    return out or list(run_roots(fmt, metadata, messages).paths)


def _inside(raw: str, folders: list[str]) -> bool:
    p = raw.strip().strip("'\"").replace("\\", "/") if _WINDOWS.match(raw.strip()) else raw.strip().strip("'\"")
    if p.startswith(("~", "$")):
        return False
    if not p.startswith("/") and not _WINDOWS.match(p):
        return True
    for f in folders:
        if _WINDOWS.match(f) and (p.lower() == f.lower() or p.lower().startswith(f.lower() + "/")):
            return True
        if p == f or p.startswith(f + "/"):
            return True
    return bool(_HARNESS.match(p))


def _args(arguments: str | None) -> dict[str, Any]:
    try:
        v = json.loads(arguments) if arguments else {}
    except ValueError:
        return {"_raw": arguments}
    return v if isinstance(v, dict) else {}


def _command(args: dict[str, Any]) -> str | None:
    cmd = args.get("command", args.get("cmd"))
    if isinstance(cmd, list) and all(isinstance(x, str) for x in cmd):
        if len(cmd) >= 3 and cmd[1] in ("-c", "-lc"):
            return cmd[2]
        if cmd[:1] == ["apply_patch"]:
            return "apply_patch\n" + "\n".join(cmd[1:])
        return " ".join(cmd)
    return cmd if isinstance(cmd, str) else None


def _shell_writes(cmd: str) -> list[str | None]:
    """The files a command plainly writes (``sed -i``, heredoc, ``tee <<``, ``apply_patch``)."""
    out: list[str | None] = []
    for line in cmd.split("\n"):
        if (m := _SED_I.search(line)) is not None:
            try:
                words = shlex.split(line[line.index("sed", m.start()):])
            except ValueError:
                words = []
            stop = next((k for k, w in enumerate(words) if w in (";", "&&", "||", "|")), len(words))
            files = [w.rstrip(";") for w in words[1:stop] if w and not w.startswith("-") and not set(w) & set("<>")]
            out.append(files[-1] if len(files) >= 2 else None)
    for m in _HEREDOC_WRITE.finditer(cmd):
        out.append(m.group("a") or m.group("b") or m.group("c"))
    if _APPLY_PATCH.search(cmd):
        out.extend(_PATCH_FILE.findall(cmd) or [None])
    return out


def _failed_result(text: str, meta: Mapping[str, Any]) -> bool:
    if meta.get("is_error") is True or meta.get("success") is False:
        return True
    if isinstance(meta.get("status"), str) and meta["status"].lower() not in ("success", "ok", "completed"):
        return True
    return bool(_REFUSED.search(text[:2000]))


def edit_calls(messages: Sequence[Any], fmt: str, metadata: Mapping[str, Any] | None = None) -> list[EditCall]:
    """Every edit call the log holds (see the module docstring), in order."""
    msgs = [(getattr(sm, "seq", i), getattr(sm, "message", sm)) for i, sm in enumerate(messages)]
    md = metadata or {}
    folders = _folders(fmt, md, [m for _, m in msgs])
    results: dict[str, list[tuple[int, str, Mapping[str, Any]]]] = {}  # call id -> its results (ids repeat)
    for seq, m in msgs:
        if m.role == "tool" and m.tool_call_id:
            results.setdefault(m.tool_call_id, []).append((seq, m.text, m.meta or {}))
    steps = {seq: k + 1 for k, seq in enumerate(s for s, m in msgs if m.role == "assistant" and m.kind == KIND_MESSAGE)}
    out: list[EditCall] = []
    open_file: str | None = None
    system = ""  # the latest system prompt (Aider's names its edit format)
    for pos, (seq, m) in enumerate(msgs):
        if m.role == "system" and m.kind == KIND_MESSAGE:
            system = m.text
        if m.role != "assistant" or m.kind != KIND_MESSAGE:
            continue
        nxt = msgs[pos + 1][1] if pos + 1 < len(msgs) else None
        step = steps.get(seq)
        cut = (m.meta or {}).get("stop_reason") in CUT_OFF_STOPS  # a cut-off reply's calls without a result never ran
        if fmt in ("aider", "aider_chat"):
            out.extend(_aider_calls(seq, step, m, _until_next_call(msgs, pos), folders, fmt == "aider_chat", system))
            continue
        for c in m.tool_calls or ():
            name = c.name.lower()
            args = _args(c.arguments)
            text, meta = next(((t, mt) for s, t, mt in results.get(c.id or "", []) if s > seq), ("", {}))
            if not text and nxt is not None and nxt.role == "user" and cline_result_tool(nxt.text):
                text, meta = nxt.text, nxt.meta or {}
            paths: list[str | None] = []
            if name in _SHELLS:
                cmd = _command(args)
                paths = _shell_writes(cmd) if cmd else []
                applied = not _SHELL_FAILED.search(text[:4000])
            elif name in _EDITORS:
                if args.get("command") in _EDITOR_WRITES:
                    paths = [next((args[k] for k in _PATHS if isinstance(args.get(k), str)), None)]
                applied = not _failed_result(text, meta)
            elif name in _EDIT_TOOLS:
                raw = args.get("_raw", args.get("input"))
                if name == "apply_patch" and isinstance(raw, str):
                    paths = list(_PATCH_FILE.findall(raw)) or [None]
                else:
                    path = next((args[k] for k in _PATHS if isinstance(args.get(k), str)), None)
                    paths = [path if path is not None or name not in ("edit", "insert") else open_file]
                applied = not _failed_result(text, meta)
            else:
                path = args.get("path") if name == "open" and isinstance(args.get("path"), str) else None
                open_file = path or open_file
                continue
            if name == "create" and paths and paths[0]:
                open_file = paths[0]
            if cut and not any(s > seq for s, _, _ in results.get(c.id or "", [])):
                applied = False
            for p in paths:
                out.append(EditCall(seq, step, c.name, p, applied, p is None or _inside(p, folders), c.arguments))
        if not m.tool_calls and fmt in ("mini_swe_agent", "swe_agent"):
            cmd = text_action(m.text)
            if cmd is None:
                continue
            obs = nxt.text if nxt is not None and nxt.role == "user" else ""
            ran = nxt is None or not is_feedback(nxt)  # a turn the harness turned down ran nothing
            if (o := _OPENS.match(cmd)) is not None and fmt == "swe_agent":
                open_file = o.group(1)
            w = _WINDOWED.match(cmd) if fmt == "swe_agent" else None
            paths = [w.group(2) or open_file] if w else _shell_writes(cmd)
            bad = bool(_REFUSED.search(obs[:2000])) if w else bool(_SHELL_FAILED.search(obs[:4000]))
            for p in paths:
                out.append(EditCall(seq, step, "bash", p, ran and not bad, p is None or _inside(p, folders)))
    return out


_AIDER_LISTING = re.compile(r"^[^\s`]+\.\w+\s*\n```", re.MULTILINE)  # whole format: a file name, then its fence


def _until_next_call(msgs: Sequence[tuple[int, Any]], pos: int) -> str:
    """The text of the user messages between the reply at ``pos`` and the next model call's reply:
    where Aider's LLM history puts its feedback on the reply's blocks (the next call's last user
    message, after the messages Aider rebuilds: "I updated the files.", a scripted "Ok.")."""
    out = []
    for _, m in msgs[pos + 1:]:
        if m.role == "assistant" and m.kind == KIND_MESSAGE:
            break
        if m.role == "user" and m.kind == KIND_MESSAGE:
            out.append(m.text)
    return "\n".join(out)


def _aider_calls(seq: int, step: int | None, m: Any, after: str, folders: list[str], chat: bool,
                 system: str) -> list[EditCall]:
    """Aider's edits of one reply: as its chat history reports them (one call per file it applied
    edits to, one per block it could not apply); else (the LLM history) as the system prompt in
    force asks for them: one per SEARCH block, with its file and its arguments as the events
    hold them (failed when Aider's feedback before the next call quotes it), or one per
    whole-file listing."""
    meta = m.meta or {}
    if "edits_applied" in meta or "edits_failed" in meta:
        calls = [EditCall(seq, step, "aider_edit", p, True, _inside(p, folders)) for p in meta.get("edits_applied", [])]
        calls += [EditCall(seq, step, "aider_edit", f.get("path"), False, _inside(f.get("path") or "", folders))
                  for f in meta.get("edits_failed", []) if isinstance(f, dict)]
        return calls
    if chat:
        return []  # the chat history reports no edit after this reply: Aider applied none
    if "*file listing*" in system:
        return [EditCall(seq, step, "aider_edit", None, True, True) for _ in _AIDER_LISTING.findall(m.text)]
    if "SEARCH/REPLACE" not in system:
        return []  # ask mode: no edit format
    failed = aider_failed_blocks(after) if AIDER_FAILED in after else []
    return [EditCall(seq, step, "aider_edit", b.path, (b.path, b.search.strip()) not in failed,
                     _inside(b.path or "", folders), json.dumps({"path": b.path, "old_str": b.search,
                                                                 "new_str": b.replace}))
            for b in aider_blocks(m.text)]


def _paths_match(raw: str | None, edited: str) -> bool:
    if raw is None:
        return True
    r = raw.strip().strip("'\"").replace("\\", "/").rstrip("/")
    e = edited.rstrip("/")
    return r == e or r.endswith("/" + e) or e.endswith("/" + r.lstrip("./")) or r.lstrip("./") == e


def _why_missing(call: EditCall, acts: list[EditAction], unapplied: dict[int, str | None],
                 events: list[Event]) -> str:
    if not acts:
        ev = next((e for e in events if e.seq == call.seq and e.type == "action"
                   and (call.arguments is None or e.arguments == call.arguments)), None)
        if ev is None:
            return "no action event for it"
        if ev.skip is not None:
            return f"its action is set aside ({ev.skip})"
        if ev.index in unapplied:
            return "taken as not applied: " + (unapplied[ev.index] or "its result")
        return "not recognised as an edit"
    edits = [x for a in acts for x in a.edits if _paths_match(call.path, x.path)]
    if not edits:
        return "the edit seen is of " + ", ".join(sorted({x.path for a in acts for x in a.edits}))
    if call.inside:
        return f"taken as outside the repository ({edits[0].path})"
    return f"taken as inside the repository though it lies outside the working folder ({edits[0].path})"


def edit_consistency(store: Any, session_id: str) -> dict[str, Any]:
    """The successful edit calls the log holds (``calls``), those of them the effective edits hold
    as the call says (``seen``), the edit calls whose result says they did not apply (``failed``),
    each call the analyses miss (``missing``: step, seq, tool, path, why), and each failed call
    they hold as an edit all the same (``seen_not_applied``: step, seq, tool, path), and the edit
    calls of an export that does not hold their path (``unrecorded``: step, seq, tool); plain JSON
    values, the first two lists empty when they agree."""
    row = store.session(session_id)
    messages = store.messages(session_id)
    md = row.get("metadata") or {}
    calls = edit_calls(messages, row["format"], md)
    rev = extract_events(messages, row["format"], session_id, md)
    done: dict[int, list[EditAction]] = {}
    unapplied: dict[int, str | None] = {}
    for act, kept, why in applied_edits(rev):
        if kept is not None:
            done.setdefault(act.event.index, []).append(kept)
        if kept is None or why:
            unapplied[act.event.index] = why
    by_seq: dict[int, list[Event]] = {}
    for e in rev.events:
        if e.type == "action":
            by_seq.setdefault(e.seq, []).append(e)
    ok = [c for c in calls if c.applied]
    # An export that renders a call's input as text (SpecStory: ``tool_arguments: "rendered"``) may
    # not hold the path an edit wrote: such a call is no edit anyone can see, and it is counted apart
    # (``unrecorded``), not as one the analyses miss.
    rendered = md.get("tool_arguments") == "rendered"
    unrecorded = [{"step": c.step, "seq": c.seq, "tool": c.tool} for c in ok if rendered and not c.path]
    ok = [c for c in ok if not (rendered and not c.path)]
    seen = 0
    missing: list[dict[str, Any]] = []
    for c in ok:
        evs = [e for e in by_seq.get(c.seq, []) if c.arguments is None or e.arguments == c.arguments]
        acts = [a for e in evs for a in done.get(e.index, [])]
        hit = [x for a in acts for x in a.edits if _paths_match(c.path, x.path) and x.in_repo == c.inside]
        if hit:
            seen += 1
        else:
            missing.append({"step": c.step, "seq": c.seq, "tool": c.tool, "path": c.path,
                            "why": _why_missing(c, acts, unapplied, rev.events)})
    # the reverse: an edit call the log says did not apply (an Aider block it could not match, a
    # tool result of failure) that the effective edits hold all the same; by its own arguments only
    # (a text action names no single edit of its turn)
    wrongly: list[dict[str, Any]] = []
    for c in calls:
        if c.applied or c.arguments is None:
            continue
        evs = [e for e in by_seq.get(c.seq, []) if e.arguments == c.arguments]
        if any(done.get(e.index) for e in evs):
            wrongly.append({"step": c.step, "seq": c.seq, "tool": c.tool, "path": c.path})
    return {"calls": len(ok), "seen": seen, "failed": len(calls) - len(ok) - len(unrecorded), "missing": missing,
            "seen_not_applied": wrongly, "unrecorded": unrecorded}


__all__ = ["EditCall", "edit_calls", "edit_consistency"]
