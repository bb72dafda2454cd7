"""The entries of a Pi session, as the branch Pi would build its context from.

Version 1 files are a linear list (no ids); a compaction names the first entry it kept by its
index in the file's entries (``firstKeptEntryIndex``, the header being entry 0). Versions 2
and 3 link entries by ``id`` / ``parentId``: the current branch is the path from the leaf
(the file's last entry, where Pi's ``SessionManager`` resumes) to the root, and a compaction
names its first kept entry by ``firstKeptEntryId``. Entries on other branches (an abandoned
attempt the user left through ``/tree`` or ``branch``) were not in the context of the calls
on this one: they are counted, not read. A parent link that loops back is cut there, with a
warning (as the ChatGPT importer does with a ``current_node`` path).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..base import ImportContext, as_int, as_str


@dataclass(slots=True)
class Entry:
    """One entry of the branch: its record, file line, index among the file's entries (header
    = 0, as ``firstKeptEntryIndex`` counts) and its id (v1: the index as text)."""

    rec: dict[str, Any]
    line: int
    index: int
    id: str


@dataclass(slots=True)
class Branch:
    header: dict[str, Any]
    version: int
    entries: list[Entry] = field(default_factory=list)
    off_branch: int = 0  # entries on other branches of the tree
    branches: int = 1  # leaves of the tree


def branch(values: list[tuple[int, Any]], ctx: ImportContext) -> Branch:
    """The header and the current branch of a file's ``(line, value)`` list."""
    header: dict[str, Any] = {}
    all_entries: list[Entry] = []
    for index, (line, rec) in enumerate(values):
        if not isinstance(rec, dict):
            ctx.warn("entry is not a JSON object; skipped", line=line)
            ctx.skip("malformed entry")
            continue
        if rec.get("type") == "session":
            if not header:
                header = rec
            else:
                ctx.warn("a second session header; ignored it", line=line)
                ctx.skip("extra session header")
            continue
        all_entries.append(Entry(rec, line, index, str(index)))
    version = as_int(header.get("version")) or 1
    tree = version >= 2 or any(isinstance(e.rec.get("id"), str) for e in all_entries[:8])
    if not tree:
        return Branch(header, version, all_entries)
    return _tree_branch(header, version, all_entries, ctx)


def _tree_branch(header: dict[str, Any], version: int, entries: list[Entry], ctx: ImportContext) -> Branch:
    by_id: dict[str, Entry] = {}
    without_id = 0
    for e in entries:
        eid = as_str(e.rec.get("id"))
        if eid is None:
            without_id += 1
            continue
        e.id = eid
        by_id[eid] = e  # a repeated id: the later entry, as Pi's index keeps it
    if without_id:
        ctx.warn(f"{without_id} entr{'y' if without_id == 1 else 'ies'} without an id in a tree-shaped session; "
                 "left them out")
        ctx.skip("entry without an id", without_id)
    leaf = next((e for e in reversed(entries) if e.id in by_id and by_id[e.id] is e), None)
    if leaf is None:
        return Branch(header, version)
    path: list[Entry] = []
    seen: set[str] = set()
    node: Entry | None = leaf
    while node is not None and node.id not in seen:
        seen.add(node.id)
        path.append(node)
        parent = node.rec.get("parentId")
        node = by_id.get(parent) if isinstance(parent, str) else None
        if isinstance(parent, str) and node is None and parent != path[-1].id:
            ctx.warn(f"entry {path[-1].id}: parent {parent} is not in the file; the branch starts there",
                     line=path[-1].line)
    if node is not None:
        ctx.warn(f"parent links form a cycle at entry {node.id}; stopped there", line=node.line)
    path.reverse()
    parents = {e.rec.get("parentId") for e in by_id.values()}
    leaves = sum(1 for eid in by_id if eid not in parents)
    off = len(by_id) - len(path)
    if off:
        ctx.skip("entry on another branch", off)
    return Branch(header, version, path, off_branch=off, branches=max(leaves, 1))
