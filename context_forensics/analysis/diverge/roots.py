"""Roots: the folder a run worked in, as its log records it.

An agent that writes absolute paths (Claude Code, Pi, Cline, Copilot CLI, Gemini CLI, Codex)
edits ``/home/me/proj/lib/x.ex``; the repository's file is ``lib/x.ex``. ``run_roots`` reads the
run's root from what the log records, the first source that gives one:

1. the session metadata's working folder: ``cwd`` (Claude Code: the first record's ``cwd``; Pi:
   the session header's; Codex: ``session_meta``'s; Cline: the environment details' "Current
   Working Directory (...)"), Copilot CLI's ``context.gitRoot`` (else ``context.cwd``);
2. Gemini CLI's ``project_hash``, the SHA-256 of the project root: the prefix of an absolute path
   in the run's tool calls or results whose hash it is (a root the log proves, not a guess);
3. a git root in tool output: what ``git rev-parse --show-toplevel`` printed, or an absolute
   folder whose listing (``ls``, an editor's ``view``) shows ``.git``; else the working folder
   ``pwd`` printed.

Harness roots (``/testbed``, ``/workspace/<instance>``, SWE-agent's ``/<owner>__<repo>``) are
known to ``normalize`` for every run. A root is stripped only as the leading prefix of an
absolute path (``normalize.strip_roots``).
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_WINDOWS = re.compile(r"^[A-Za-z]:[\\/]")
_ABS_PATH = re.compile(r"(?<![\w.~/-])(/(?:[\w.@+-]+/)*[\w.@+-]+)")
_LISTS_GIT = re.compile(r"(?:^|\s)\.git/?$", re.MULTILINE)
_PATH_ARGS = ("path", "file_path", "absolutePath", "absolute_path", "dir_path", "directory", "filename",
              "notebook_path", "target_file", "workdir")
_LS = re.compile(r"^\s*ls(?:\s+-[A-Za-z]+)*\s+(/[^\s;&|]+?)/?\s*$")  # ``ls -la /abs/folder``
_PWD = re.compile(r"^\s*pwd\s*$")
MAX_HASHED = 5000  # folder prefixes tried against a Gemini CLI project hash


@dataclass(frozen=True)
class Roots:
    """A run's own roots (absolute folders) and where the log records them."""

    paths: tuple[str, ...] = ()
    source: str = ""  # e.g. "session metadata (cwd)"; "" when the log records none

    def to_dict(self) -> dict[str, Any]:
        return {"paths": list(self.paths), "source": self.source or None}


def clean_root(p: Any) -> str | None:
    """A recorded folder as a root: absolute, without a trailing separator; None for anything
    else (a relative path, the file-system root, a home shorthand)."""
    if not isinstance(p, str):
        return None
    p = p.strip()
    if _WINDOWS.match(p):
        p = p.replace("\\", "/").rstrip("/")
        return p if len(p) > 3 else None
    if not p.startswith("/"):
        return None
    p = posixpath.normpath(p)
    return p if p.count("/") >= 1 and p != "/" else None


def _metadata_root(fmt: str, md: Mapping[str, Any]) -> Roots:
    ctx = md.get("context")
    if isinstance(ctx, Mapping):  # Copilot CLI's session.start context
        for key in ("gitRoot", "cwd"):
            r = clean_root(ctx.get(key))
            if r:
                return Roots((r,), f"session metadata (context.{key})")
    r = clean_root(md.get("cwd"))
    if r:
        return Roots((r,), "session metadata (cwd)")
    return Roots()


def _messages(messages: Sequence[Any]) -> list[Any]:
    return [getattr(m, "message", m) for m in messages]


def _call_paths(msgs: list[Any]) -> list[tuple[Any, str]]:
    """(tool call, the absolute path one of its path arguments names)."""
    out = []
    for m in msgs:
        for c in m.tool_calls or ():
            try:
                args = json.loads(c.arguments) if c.arguments else {}
            except ValueError:
                continue
            if not isinstance(args, dict):
                continue
            for k in _PATH_ARGS:
                v = args.get(k)
                if isinstance(v, str) and (v.startswith("/") or _WINDOWS.match(v)):
                    out.append((c, v))
            cmd = args.get("command")
            if isinstance(cmd, str) and (ls := _LS.match(cmd)) is not None:
                out.append((c, ls.group(1)))
    return out


def _project_hash_root(project_hash: str, msgs: list[Any]) -> Roots:
    """The folder whose SHA-256 is Gemini CLI's project hash, among the prefixes of the absolute
    paths in the run's tool calls and results."""
    texts = [c.arguments or "" for m in msgs for c in (m.tool_calls or ())]
    texts += [m.text for m in msgs if m.role == "tool" and m.text]
    tried: set[str] = set()
    for text in texts:
        for m in _ABS_PATH.finditer(text):
            p = m.group(1)
            while p.count("/") >= 1 and p not in tried and len(tried) < MAX_HASHED:
                tried.add(p)
                if hashlib.sha256(p.encode("utf-8")).hexdigest() == project_hash:
                    return Roots((p,), "Gemini CLI project hash (SHA-256 of the project root)")
                p = posixpath.dirname(p)
                if p == "/":
                    break
    return Roots()


def _git_root(msgs: list[Any]) -> Roots:
    """A git root tool output shows: ``git rev-parse --show-toplevel``'s answer, or an absolute
    folder whose listing shows ``.git``."""
    results = {m.tool_call_id: m.text for m in msgs if m.role == "tool" and m.tool_call_id}
    for c, path in _call_paths(msgs):
        out = results.get(c.id or "")
        if out and _LISTS_GIT.search(out[:20000]):
            r = clean_root(path)
            if r:
                return Roots((r,), "git root in tool output (a listing that shows .git)")
    for m in msgs:
        for c in m.tool_calls or ():
            if "rev-parse" not in (c.arguments or "") or "--show-toplevel" not in c.arguments:
                continue
            out = (results.get(c.id or "") or "").strip()
            first = out.split("\n", 1)[0].strip() if out else ""
            r = clean_root(first)
            if r and " " not in first:
                return Roots((r,), "git root in tool output (git rev-parse --show-toplevel)")
    for m in msgs:
        for c in m.tool_calls or ():
            try:
                cmd = json.loads(c.arguments).get("command") if c.arguments else None
            except (ValueError, AttributeError):
                continue
            out = (results.get(c.id or "") or "").strip()
            if isinstance(cmd, str) and _PWD.match(cmd) and out and "\n" not in out and (r := clean_root(out)):
                return Roots((r,), "working folder in tool output (pwd)")
    return Roots()


def run_roots(fmt: str, metadata: Mapping[str, Any] | None, messages: Sequence[Any]) -> Roots:
    """The run's own roots (see the module docstring); empty when the log records none."""
    md = metadata or {}
    found = _metadata_root(fmt, md)
    if found.paths:
        return found
    msgs = _messages(messages)
    ph = md.get("project_hash")
    if isinstance(ph, str) and re.fullmatch(r"[0-9a-f]{64}", ph):
        found = _project_hash_root(ph, msgs)
        if found.paths:
            return found
    return _git_root(msgs)


__all__ = ["Roots", "clean_root", "run_roots"]
