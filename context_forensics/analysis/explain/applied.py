"""Applied edits and the files a run's task is about.

Which edits applied is diverge's (``diverge.applied``: ``applied_edits``, ``effective_edits``,
re-exported here with ``bash_syntax_line`` and ``strip_wrappers``, which ``checks`` reads shell
commands with). ``task_files`` / ``source_edits``: the files the task is about (the final
submission's, and the run's own fixes a commit left out of it; else the files that existed before
the run and are not its scratch scripts) and the effective edits of them.
"""

from __future__ import annotations

import re
from typing import Any

from ..diverge.actions import is_read_only
from ..diverge.applied import applied_edits, bash_syntax_line, effective_edits, strip_wrappers
from ..diverge.decisive import final_patch
from ..diverge.edits import EditAction, command_lines
from ..diverge.events import RunEvents

__all__ = ["applied_edits", "bash_syntax_line", "command_lines", "effective_edits", "source_edits", "strip_wrappers",
           "task_files"]

# --- the files the task is about --------------------------------------------------------------

_SCRATCH = re.compile(r"(?:^|/)(?:repro\w*|reproduce\w*|debug\w*|scratch\w*|tmp\w*|temp\w*|demo\w*|sandbox\w*"
                      r"|try\w*|verify\w*|check_\w+|test_(?:fix|repro|issue|bug|my|patch|change|edge|solution)\w*"
                      r"|my_?test\w*|quick_?test\w*|edge_?cases?\w*)\.\w+$")


def _existed(path: str, first: EditAction, rev: RunEvents) -> bool:
    """Whether a file was there before the run: its first edit needs its text (a replacement,
    an insert, a revert), or an action that only looks named it, or a tool output listed it,
    before that edit."""
    ops = {x.op for x in first.edits if x.path == path}
    if ops & {"replace", "insert", "revert", "undo", "delete"}:
        return True
    for e in rev.aligned():
        if e.seq >= first.event.seq:
            break
        if e.type == "action" and is_read_only(e.key) and path in e.key:
            return True
        if e.type == "result" and path in e.text and re.search(rf"(?:^|[\s'\"/]){re.escape(path)}\b", e.text):
            return True
    return False


def task_files(rev: RunEvents, row: dict[str, Any] | None = None,
               edits: list[EditAction] | None = None) -> tuple[set[str], str]:
    """The files the task is about and how they were chosen: the files of the final submission's
    patch when the log has one (files it only adds count when it changes no existing file), with
    the files of the run's own fixes a ``git commit`` / ``git stash`` took out of it; else the
    files the run edited that existed before it and are not its own scratch scripts."""
    edits = effective_edits(rev) if edits is None else edits
    patch = final_patch(rev, row, edits)
    if not patch.reconstructed and (patch.files or patch.unsubmitted):
        changed = {p for p, f in patch.files.items() if f.status != "added"}
        own = {u["file"] for u in patch.unsubmitted if u["by"]}  # its own fixes a commit left out
        if own:
            return changed | own, "the final submission's patch and the run's own fixes a commit left out of it"
        return changed or set(patch.files), "the final submission's patch"
    first: dict[str, EditAction] = {}
    for act in edits:
        for x in act.edits:
            first.setdefault(x.path, act)
    files = {p for p, act in first.items()
             if all(x.in_repo for x in act.edits if x.path == p) and not _SCRATCH.search(p) and _existed(p, act, rev)}
    return files, "files the run edited that existed before it"


def source_edits(rev: RunEvents, row: dict[str, Any] | None = None,
                 edits: list[EditAction] | None = None) -> list[EditAction]:
    """The effective edits (``edits``) of the files the task is about (``task_files``), each cut to them."""
    edits = effective_edits(rev) if edits is None else edits
    files, _ = task_files(rev, row, edits)
    return [x for x in (a.only(files) for a in edits) if x is not None]
